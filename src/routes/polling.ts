import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply } from 'fastify'
import { performance } from 'node:perf_hooks'
import { Errors } from '../errors.js'
import type { PollingReaktorStatus } from '../scheduler/index.js'
import { ErrorBody } from '../schemas/common.js'
import { MessageBody, PollingList, PollingStatus, ReaktorIdParams, type PollingStatusType } from '../schemas/polling.js'

function iso (date: Date | null): string | null {
  return date === null ? null : date.toISOString()
}

function toBody (s: PollingReaktorStatus): PollingStatusType {
  return {
    reaktorDefinitionId: s.reaktorDefinitionId,
    state: s.state,
    interval: s.interval,
    effectiveInterval: s.effectiveInterval,
    lastRun: iso(s.lastRun),
    nextRun: iso(s.nextRun),
    updatedAt: iso(s.updatedAt),
    label: s.label,
    description: s.description,
    autoStart: s.autoStart,
    lastError: s.lastError,
    consecutiveFailures: s.consecutiveFailures,
    owner: s.owner
  }
}

/** One database read shared by the requests that join it, and the JSON of its answer, serialized once. */
interface SharedRead<T> { value: Promise<T>, json?: string, generation: number, readAt: number }

/**
 * Coalesces concurrent identical reads: requests that arrive in the same turn of the event loop
 * share ONE database read, started (setImmediate) after all of them have arrived. A request never
 * joins a read that began before it arrived, so it still sees every write acknowledged before it
 * was sent (a start answered 200, then a status, shows `running`), on this node or any other.
 * `generation` and `readAt` are taken when the read starts, for the status cache.
 */
function coalesce<T> (read: (key: string) => Promise<T>, generation: () => number): (key: string) => SharedRead<T> {
  const gathering = new Map<string, SharedRead<T>>()
  return (key) => {
    let shared = gathering.get(key)
    if (shared === undefined) {
      const created: SharedRead<T> = {
        generation: 0,
        readAt: 0,
        value: new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
          // From now on, newcomers start a new read.
          gathering.delete(key)
          created.generation = generation()
          created.readAt = performance.now()
          return await read(key)
        })
      }
      shared = created
      gathering.set(key, shared)
    }
    return shared
  }
}

/** Start, stop, status and list of polling reaktors. Thin: the scheduler does the work. */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  // Status and list answered from memory while that stays as right as a read per request
  // (start/stop on any node: always visible; run results: at most 100 ms later); see status-cache.ts.
  const cache = fastify.statusCache

  const generation = (): number => cache.generation
  const readStatus = coalesce(async (id) => toBody(await fastify.scheduler.status(id)), generation)
  const readList = coalesce(async () => ({ pollingReaktors: (await fastify.scheduler.list()).map(toBody) }), generation)

  /**
   * The JSON of `key` ('' for the list): from the cache once `sync()` has confirmed that no
   * start/stop committed before this request has been missed; otherwise from a database read
   * started after the request arrived (shared by the requests of this turn), then cached. The JSON
   * is serialized through the route's response schema, once per read.
   */
  const answer = async <T>(reply: FastifyReply, key: string, read: (key: string) => SharedRead<T>): Promise<FastifyReply> => {
    if (cache.get(key) !== undefined && await cache.sync()) {
      const json = cache.get(key)
      if (json !== undefined) {
        cache.hits++
        return await reply.type('application/json; charset=utf-8').send(json)
      }
    }
    const shared = read(key)
    const value = await shared.value
    if (shared.json === undefined) {
      cache.reads++
      shared.json = String(reply.serialize(value))
      cache.set(key, shared.json, shared.generation, shared.readAt)
    }
    return await reply.type('application/json; charset=utf-8').send(shared.json)
  }

  const ensureRegistered = (reaktorId: string): void => {
    if (!fastify.apps.pollingReaktors.has(reaktorId)) throw new Errors.ReaktorNotFound(reaktorId)
  }

  // Start and stop differ only in the scheduler call and the words of the answer.
  const controls = [
    { action: 'start', summary: 'Start a polling reaktor (idempotent)', done: 'started successfully', already: 'is already running', apply: async (id: string) => await fastify.scheduler.startReaktor(id) },
    { action: 'stop', summary: 'Stop a polling reaktor (idempotent)', done: 'stopped successfully', already: 'is already stopped', apply: async (id: string) => await fastify.scheduler.stopReaktor(id) }
  ] as const
  for (const control of controls) {
    fastify.post(`/polling/:reaktorId/${control.action}`, {
      schema: {
        tags: ['polling'],
        summary: control.summary,
        params: ReaktorIdParams,
        response: { 200: MessageBody, 400: ErrorBody, 401: ErrorBody, 404: ErrorBody, 500: ErrorBody }
      }
    }, async (request) => {
      const { reaktorId } = request.params
      ensureRegistered(reaktorId)
      // Written (and awaited) before we answer: a crash after the 200 never loses the change.
      const changed = await control.apply(reaktorId)
      // The NOTIFY does this too (and sync() waits for it); here at once for this node.
      cache.invalidate(reaktorId)
      return { message: `Polling reaktor "${reaktorId}" ${changed ? control.done : control.already}` }
    })
  }

  fastify.get('/polling/:reaktorId/status', {
    schema: {
      tags: ['polling'],
      summary: 'Status of a polling reaktor',
      params: ReaktorIdParams,
      response: { 200: PollingStatus, 400: ErrorBody, 401: ErrorBody, 404: ErrorBody, 500: ErrorBody }
    }
  }, async (request, reply) => {
    const { reaktorId } = request.params
    ensureRegistered(reaktorId)
    return await answer(reply, reaktorId, readStatus)
  })

  fastify.get('/polling', {
    schema: {
      tags: ['polling'],
      summary: 'Every registered polling reaktor with its status, sorted by id',
      response: { 200: PollingList, 400: ErrorBody, 401: ErrorBody, 500: ErrorBody }
    }
  }, async (_request, reply) => {
    return await answer(reply, '', readList)
  })
}
export default routes
