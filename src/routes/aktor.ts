import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Ajv, type ValidateFunction } from 'ajv'
import addFormatsModule from 'ajv-formats'
import { AktorCall, ClientClosed, invokeAktor } from '../apps/invoke.js'
import type { RegisteredReaktor } from '../apps/types.js'
import { formatDuration } from '../duration.js'
import { Errors } from '../errors.js'
import { AktorOutput, AktorParams } from '../schemas/aktor.js'
import { described, ErrorBody } from '../schemas/common.js'

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

  // The timeout's reason is the 504 itself: it is what the aktor's signal is aborted with too.
  const timeoutReason = (id: string, registered: RegisteredReaktor): Error =>
    new Errors.AktorTimeout(id, registered.registration.timeout ?? formatDuration(registered.timeoutMs))

  fastify.post('/aktor/:aktorName', {
    bodyLimit: fastify.config.aktorBodyLimit,
    schema: {
      tags: ['aktor'],
      operationId: 'callAktor',
      summary: 'Call a standard reaktor with a JSON input',
      params: AktorParams,
      response: {
        200: AktorOutput,
        400: described(ErrorBody, 'The body does not match the aktor\'s input schema, or the name is invalid'),
        401: ErrorBody,
        404: described(ErrorBody, 'No standard reaktor of this name is registered'),
        413: described(ErrorBody, 'The body is larger than AKTOR_BODY_LIMIT'),
        415: ErrorBody,
        500: described(ErrorBody, 'The aktor failed (the node logs why; the body carries no detail)'),
        503: ErrorBody,
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
      output = await invokeAktor(registered, input, call, { reaktorId: id, runId: request.id, log: request.log, response: reply.raw, timeoutReason })
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
