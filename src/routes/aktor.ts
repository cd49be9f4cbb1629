import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Ajv, type ValidateFunction } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { performance } from 'node:perf_hooks'
import type { RegisteredReaktor } from '../apps/types.js'
import type { AktorContext } from '../sdk/types.js'
import { formatDuration } from '../duration.js'
import { Errors } from '../errors.js'
import { AktorOutput, AktorParams } from '../schemas/aktor.js'
import { ErrorBody } from '../schemas/common.js'

// ajv-formats is CommonJS: its default export arrives as the module object under NodeNext.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (ajv: Ajv) => Ajv

interface StatusError { statusCode?: unknown, message?: unknown }

/** An error the aktor threw that names a client error (4xx): its status and message are kept. */
function clientError (err: unknown): { statusCode: number, message: string } | undefined {
  if (typeof err !== 'object' || err === null) return undefined
  const { statusCode, message } = err as StatusError
  if (typeof statusCode !== 'number' || !Number.isInteger(statusCode) || statusCode < 400 || statusCode > 499) return undefined
  return { statusCode, message: typeof message === 'string' ? message : '' }
}

class ClientClosed extends Error {
  constructor () {
    super('client closed the request')
    this.name = 'ClientClosed'
  }
}

function isThenable (value: unknown): value is PromiseLike<unknown> {
  return (typeof value === 'object' || typeof value === 'function') && value !== null && typeof (value as { then?: unknown }).then === 'function'
}

/** The state of one aktor call: settled or not, why it was interrupted, and its signal if asked for. */
class AktorCall {
  settled = false
  /** Why the call was cut short (AktorTimeout or ClientClosed); undefined while it was not. */
  reason: Error | undefined
  private controller: AbortController | undefined

  /** The aktor's signal, created on first use (aborted already if the call was interrupted). */
  signal (): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController()
      if (this.reason !== undefined) this.controller.abort(this.reason)
    }
    return this.controller.signal
  }

  interrupt (reason: Error): void {
    this.reason = reason
    this.controller?.abort(reason)
  }
}

/**
 * `POST /api/v1/aktor/{aktorName}`: runs a standard reaktor's aktor on the JSON body and answers
 * its output. Registered inside the scope that authenticates X-Service-Token.
 */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  // JSON only (no text/plain strings): applies to this scope, not to the rest of the API.
  fastify.removeContentTypeParser('text/plain')

  // Input schemas are compiled once, at start, so that a broken schema stops the start naming
  // its reaktor instead of failing the first call. Ajv as Fastify configures it, minus coercion:
  // an aktor gets exactly the JSON it was sent.
  const ajv = addFormats(new Ajv({ allErrors: false, useDefaults: true, coerceTypes: false, strict: false }))
  const validators = new Map<string, ValidateFunction>()
  for (const [id, registered] of fastify.apps.reaktors) {
    const schema = registered.registration.inputSchema
    if (schema === undefined) continue
    try {
      validators.set(id, ajv.compile(schema))
    } catch (err) {
      throw new Error(`app ${registered.app.name}@${registered.app.version}: reaktor "${id}": inputSchema is not a valid JSON Schema: ${(err as Error).message}`, { cause: err })
    }
  }

  /**
   * Calls the aktor. Its answer is the value (a synchronous aktor) or a promise settled by the
   * aktor or by an interruption, whichever comes first: the timeout (reason: AktorTimeout) or the
   * client going away (reason: ClientClosed). Either answers at once, even when the aktor ignores
   * its signal; its late result or rejection is then dropped.
   *
   * Per call, only what the call uses is made (this route is on the hot path of every aktor call):
   * - `context.signal` and `context.log` are getters. The AbortController and the child logger are
   *   created on first use; a signal asked for after an interruption is already aborted with its
   *   reason, one asked for after the answer never aborts, exactly as an eager one would behave.
   * - An aktor that answers synchronously (not a promise) needs no timer and no close listener:
   *   neither could fire before its answer. Otherwise ONE promise, one timer and one listener,
   *   released as soon as the call settles (no Promise.race, no abort listener of our own).
   */
  const run = (registered: RegisteredReaktor, id: string, input: unknown, call: AktorCall, request: FastifyRequest, reply: FastifyReply): unknown => {
    const startedAt = performance.now()
    let log: AktorContext['log'] | undefined
    const context: AktorContext = {
      get signal () { return call.signal() },
      get log () { return (log ??= request.log.child({ aktor: id })) },
      settings: registered.app.settings,
      reaktorId: id,
      runId: request.id
    }
    // A throw (of createReaktor too) is the aktor failing, as a rejection is.
    const answer: unknown = registered.registration.createReaktor({ settings: registered.app.settings })(input, context)
    if (!isThenable(answer)) {
      call.settled = true
      return answer
    }
    return new Promise((resolve, reject) => {
      const settle = (): boolean => {
        if (call.settled) return false
        call.settled = true
        clearTimeout(timer)
        reply.raw.off('close', onClose)
        return true
      }
      const interrupt = (reason: Error): void => {
        if (!settle()) return
        call.interrupt(reason)
        reject(reason)
      }
      // The response closing before it was fully written means the client went away.
      const onClose = (): void => {
        if (!reply.raw.writableFinished) interrupt(new ClientClosed())
      }
      // The timeout counts from the call, as its synchronous part already ran.
      const timer = setTimeout(() => {
        interrupt(new Errors.AktorTimeout(id, registered.registration.timeout ?? formatDuration(registered.timeoutMs)))
      }, Math.max(0, registered.timeoutMs - (performance.now() - startedAt)))
      reply.raw.once('close', onClose)
      answer.then((value) => { if (settle()) resolve(value) }, (err: unknown) => { if (settle()) reject(err) })
    })
  }

  fastify.post('/aktor/:aktorName', {
    bodyLimit: fastify.config.aktorBodyLimit,
    schema: {
      tags: ['aktor'],
      summary: 'Call a standard reaktor with a JSON input',
      params: AktorParams,
      response: {
        200: AktorOutput,
        400: ErrorBody,
        401: ErrorBody,
        404: ErrorBody,
        413: ErrorBody,
        415: ErrorBody,
        500: ErrorBody,
        504: ErrorBody
      }
    }
  }, async (request, reply) => {
    const id = request.params.aktorName
    const registered = fastify.apps.reaktors.get(id)
    if (registered === undefined) throw new Errors.AktorNotFound(id)
    const input = request.body

    const validate = validators.get(id)
    if (validate !== undefined && !validate(input)) {
      throw fastify.httpErrors.badRequest(ajv.errorsText(validate.errors, { dataVar: 'body' }))
    }

    const call = new AktorCall()
    let output: unknown
    try {
      output = await run(registered, id, input, call, request, reply)
    } catch (err) {
      const reason = call.reason
      if (reason instanceof Errors.AktorTimeout) throw reason
      // Nobody is listening any more: not a server error (nginx's 499 "client closed request").
      if (reason instanceof ClientClosed) throw fastify.httpErrors.createError(499, reason.message)
      const client = clientError(err)
      if (client !== undefined) throw fastify.httpErrors.createError(client.statusCode, client.message)
      // The error handler logs it and answers a generic 500: an aktor's internals never leak.
      throw Object.assign(new Error(`aktor "${id}" failed`, { cause: err }), { statusCode: 500 })
    }
    // Serialized here, so that every JSON value (a bare string too) is sent as JSON.
    return await reply.type('application/json; charset=utf-8').send(JSON.stringify(output ?? null) ?? 'null')
  })
}

export default routes
