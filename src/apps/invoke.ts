import { performance } from 'node:perf_hooks'
import createError from '@fastify/error'
import { formatDuration } from '../lib/duration.js'
import type { AktorContext, AktorLogger } from '../sdk/types.js'
import { LazyAbort } from './lazy-abort.js'
import type { RegisteredReaktor } from './types.js'

// Here rather than in errors.ts (which re-exports it): reaktor-service/testing calls aktors
// through this module, and errors.ts brings in the configuration and the whole scheduler.
export const AktorTimeout = createError('REAKTOR_AKTOR_TIMEOUT', 'Aktor "%s" did not answer within %s', 504)

/** The reason a call is cut short when the client that asked for it goes away. */
export class ClientClosed extends Error {
  readonly code = 'REAKTOR_CLIENT_CLOSED'
  constructor () {
    super('client closed the request')
    this.name = 'ClientClosed'
  }
}

function isThenable (value: unknown): value is PromiseLike<unknown> {
  return (typeof value === 'object' || typeof value === 'function') && value !== null && typeof (value as { then?: unknown }).then === 'function'
}

interface StatusError { statusCode?: unknown, message?: unknown }

/** An error the aktor threw that names a client error (4xx): its status and message are kept. */
function clientError (err: unknown): { statusCode: number, message: string } | undefined {
  if (typeof err !== 'object' || err === null) return undefined
  const { statusCode, message } = err as StatusError
  if (typeof statusCode !== 'number' || !Number.isInteger(statusCode) || statusCode < 400 || statusCode > 499) return undefined
  return { statusCode, message: typeof message === 'string' ? message : '' }
}

/**
 * How a failed call is answered (the aktor route and reaktor-service/testing alike): timed out
 * (504, `cause` the AktorTimeout), the client gone (499, ClientClosed), or failed with the 4xx the
 * aktor threw (its message kept) or else 500 (`message` undefined: an aktor's internals never leak).
 */
export interface CallFailure {
  outcome: 'timed_out' | 'aborted' | 'failed'
  statusCode: number
  message: string | undefined
  cause: unknown
}

/** Why `call` failed with `err`, thrown or rejected by `invokeAktor`. */
export function callFailure (call: AktorCall, err: unknown): CallFailure {
  const reason = call.reason
  if (reason instanceof AktorTimeout) return { outcome: 'timed_out', statusCode: 504, message: reason.message, cause: reason }
  if (reason instanceof ClientClosed) return { outcome: 'aborted', statusCode: 499, message: reason.message, cause: reason }
  const client = clientError(err)
  return { outcome: 'failed', statusCode: client?.statusCode ?? 500, message: client?.message, cause: err }
}

/** An aktor's output as the route sends it: JSON text, undefined as null. */
export function outputJson (output: unknown): string {
  return JSON.stringify(output ?? null) ?? 'null'
}

/**
 * The state of one aktor call: settled or not, and (LazyAbort) why it was cut short, the timeout
 * reason or ClientClosed, with the aktor's signal if it asked for one.
 */
export class AktorCall extends LazyAbort {
  settled = false
}

/**
 * The response being written for the call (node's `http.ServerResponse` is one): its closing
 * before it was fully written means the client went away.
 */
export interface ClientResponse {
  readonly writableFinished: boolean
  once: (event: 'close', listener: () => void) => unknown
  off: (event: 'close', listener: () => void) => unknown
}

export interface InvokeOptions {
  /** `context.reaktorId`. */
  reaktorId: string
  /** `context.runId`. */
  runId: string
  /** The parent of `context.log`, which is its child bound to `{ aktor: reaktorId }`. */
  log: { child: (bindings: Record<string, unknown>) => AktorLogger }
  /** The response whose early close interrupts the call with ClientClosed. */
  response: ClientResponse
}

/**
 * Calls a standard reaktor's aktor (`createReaktor` too: its throw is the aktor failing, as a
 * rejection is). The answer is the value (a synchronous aktor) or a promise settled by the aktor
 * or by an interruption, whichever comes first: the timeout (AktorTimeout) or the client
 * going away (ClientClosed). Either answers at once, even when the aktor ignores its signal; its
 * late result or rejection is then dropped. After a failure, `call.reason` tells an interruption
 * (the value rejected with) from the aktor's own failure (undefined).
 *
 * Per call, only what the call uses is made (this is on the hot path of every aktor call):
 * - `context.signal` and `context.log` are getters. The AbortController and the child logger are
 *   created on first use; a signal asked for after an interruption is already aborted with its
 *   reason, one asked for after the answer never aborts, exactly as an eager one would behave.
 * - An aktor that answers synchronously (not a promise) needs no timer and no close listener:
 *   neither could fire before its answer. Otherwise ONE promise, one timer and one listener,
 *   released as soon as the call settles (no Promise.race, no abort listener of our own).
 */
export function invokeAktor (registered: RegisteredReaktor, input: unknown, call: AktorCall, options: InvokeOptions): unknown {
  const startedAt = performance.now()
  const { reaktorId, response } = options
  let log: AktorLogger | undefined
  const context: AktorContext = {
    get signal () { return call.signal },
    get log () { return (log ??= options.log.child({ aktor: reaktorId })) },
    settings: registered.app.settings,
    reaktorId,
    runId: options.runId
  }
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
      response.off('close', onClose)
      return true
    }
    const interrupt = (reason: Error): void => {
      if (!settle()) return
      call.abort(reason)
      reject(reason)
    }
    // The response closing before it was fully written means the client went away.
    const onClose = (): void => {
      if (!response.writableFinished) interrupt(new ClientClosed())
    }
    // The timeout counts from the call, as its synchronous part already ran.
    const timer = setTimeout(() => {
      interrupt(new AktorTimeout(reaktorId, registered.registration.timeout ?? formatDuration(registered.timeoutMs)))
    }, Math.max(0, registered.timeoutMs - (performance.now() - startedAt)))
    response.once('close', onClose)
    answer.then((value) => { if (settle()) resolve(value) }, (err: unknown) => { if (settle()) reject(err) })
  })
}
