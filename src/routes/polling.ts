import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
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

/** Spec 4.1–4.4: start, stop, status and list of polling reaktors. Thin: the scheduler does the work. */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  const ensureRegistered = (reaktorId: string): void => {
    if (!fastify.apps.pollingReaktors.has(reaktorId)) throw new Errors.ReaktorNotFound(reaktorId)
  }

  fastify.post('/polling/:reaktorId/start', {
    schema: {
      tags: ['polling'],
      summary: 'Start a polling reaktor (idempotent)',
      params: ReaktorIdParams,
      response: { 200: MessageBody, 401: ErrorBody, 404: ErrorBody }
    }
  }, async (request) => {
    const { reaktorId } = request.params
    ensureRegistered(reaktorId)
    // Written (and awaited) before we answer: a crash after the 200 never loses the start.
    const changed = await fastify.scheduler.startReaktor(reaktorId)
    return { message: changed ? `Polling reaktor "${reaktorId}" started successfully` : `Polling reaktor "${reaktorId}" is already running` }
  })

  fastify.post('/polling/:reaktorId/stop', {
    schema: {
      tags: ['polling'],
      summary: 'Stop a polling reaktor (idempotent)',
      params: ReaktorIdParams,
      response: { 200: MessageBody, 401: ErrorBody, 404: ErrorBody }
    }
  }, async (request) => {
    const { reaktorId } = request.params
    ensureRegistered(reaktorId)
    const changed = await fastify.scheduler.stopReaktor(reaktorId)
    return { message: changed ? `Polling reaktor "${reaktorId}" stopped successfully` : `Polling reaktor "${reaktorId}" is already stopped` }
  })

  fastify.get('/polling/:reaktorId/status', {
    schema: {
      tags: ['polling'],
      summary: 'Status of a polling reaktor',
      params: ReaktorIdParams,
      response: { 200: PollingStatus, 401: ErrorBody, 404: ErrorBody }
    }
  }, async (request) => {
    const { reaktorId } = request.params
    ensureRegistered(reaktorId)
    return toBody(await fastify.scheduler.status(reaktorId))
  })

  fastify.get('/polling', {
    schema: {
      tags: ['polling'],
      summary: 'Every registered polling reaktor with its status, sorted by id',
      response: { 200: PollingList, 401: ErrorBody }
    }
  }, async () => {
    return { pollingReaktors: (await fastify.scheduler.list()).map(toBody) }
  })
}
export default routes
