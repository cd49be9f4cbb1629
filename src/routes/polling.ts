import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply } from 'fastify'
import { Errors } from '../errors.js'
import { described, ErrorBody, UnknownReaktorAnswer } from '../schemas/common.js'
import { MessageBody, PollingList, PollingStatus, ReaktorIdParams } from '../schemas/polling.js'

async function sendJson (reply: FastifyReply, json: string): Promise<FastifyReply> {
  return await reply.type('application/json; charset=utf-8').send(json)
}

/** Start, stop, run now, status and list of polling reaktors: the wire format here, the work in `fastify.polling`. */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  const { polling } = fastify

  // Start and stop differ only in the call and the words of the answer.
  const controls = [
    { action: 'start', operationId: 'startPollingReaktor', summary: 'Start a polling reaktor (idempotent)', answer: 'Started, or it was already running: the message says which', done: 'started successfully', already: 'is already running', apply: polling.start },
    { action: 'stop', operationId: 'stopPollingReaktor', summary: 'Stop a polling reaktor (idempotent)', answer: 'Stopped, or it was already stopped: the message says which', done: 'stopped successfully', already: 'is already stopped', apply: polling.stop }
  ] as const
  for (const control of controls) {
    fastify.post(`/polling/:reaktorId/${control.action}`, {
      schema: {
        tags: ['polling'],
        operationId: control.operationId,
        summary: control.summary,
        params: ReaktorIdParams,
        response: { 200: described(MessageBody, control.answer), 400: ErrorBody, 401: ErrorBody, 404: UnknownReaktorAnswer, 500: ErrorBody, 503: ErrorBody }
      }
    }, async (request) => {
      const { reaktorId } = request.params
      const changed = await control.apply(reaktorId)
      await fastify.audit(request, { action: `polling.${control.action}`, targets: [reaktorId], details: { changed } })
      return { message: `Polling reaktor "${reaktorId}" ${changed ? control.done : control.already}` }
    })
  }

  fastify.post('/polling/:reaktorId/run', {
    schema: {
      tags: ['polling'],
      operationId: 'runPollingReaktorNow',
      summary: 'Run a polling reaktor now, on the node that owns it (at once, or right after its run in flight)',
      params: ReaktorIdParams,
      response: {
        202: described(MessageBody, 'The run is requested: the owner runs it at once, or right after its run in flight'),
        400: ErrorBody,
        401: ErrorBody,
        404: UnknownReaktorAnswer,
        409: described(ErrorBody, 'The reaktor is stopped: run now never starts one'),
        500: ErrorBody,
        503: ErrorBody
      }
    }
  }, async (request, reply) => {
    const { reaktorId } = request.params
    const requested = await polling.run(reaktorId)
    await fastify.audit(request, { action: 'polling.run', targets: [reaktorId], details: { requested } })
    if (!requested) throw new Errors.ReaktorStopped(reaktorId, encodeURIComponent(reaktorId))
    return await reply.code(202).send({ message: `Polling reaktor "${reaktorId}": run requested` })
  })

  fastify.get('/polling/:reaktorId/status', {
    schema: {
      tags: ['polling'],
      operationId: 'getPollingStatus',
      summary: 'Status of a polling reaktor',
      params: ReaktorIdParams,
      response: { 200: described(PollingStatus, 'The status of the reaktor'), 400: ErrorBody, 401: ErrorBody, 404: UnknownReaktorAnswer, 500: ErrorBody, 503: ErrorBody }
    }
  }, async (request, reply) => {
    return await sendJson(reply, await polling.reads.statusJson(request.params.reaktorId, reply))
  })

  fastify.get('/polling', {
    schema: {
      tags: ['polling'],
      operationId: 'listPollingReaktors',
      summary: 'Every registered polling reaktor with its status, sorted by id',
      response: { 200: described(PollingList, 'Every registered polling reaktor with its status'), 400: ErrorBody, 401: ErrorBody, 500: ErrorBody, 503: ErrorBody }
    }
  }, async (_request, reply) => {
    return await sendJson(reply, await polling.reads.listJson(reply))
  })
}
export default routes
