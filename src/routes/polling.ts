import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply } from 'fastify'
import { Errors } from '../errors.js'
import { described, ErrorBody, UnknownReaktorAnswer } from '../schemas/common.js'
import { LIST_LIMIT } from '../schemas/page-limits.js'
import { APP_NAME_MAX, LIST_OFFSET_MAX, LIST_Q_MAX, LIST_QUERY_PARAMS, LIST_SORTS, MessageBody, PollingList, PollingListQuery, PollingStatus, ReaktorIdParams } from '../schemas/polling.js'
import { digitsOnly, limitRule, pagingErrors } from './paging.js'

const JSON_TYPE = 'application/json; charset=utf-8'

async function sendJson (reply: FastifyReply, json: string): Promise<FastifyReply> {
  return await reply.type(JSON_TYPE).send(json)
}

/** sendJson without the promise, for a handler that has one already. */
function sendJsonNow (reply: FastifyReply, json: string): void {
  void reply.type(JSON_TYPE).send(json)
}

const LIMIT_RULE = limitRule(LIST_LIMIT)
const OFFSET_RULE = `offset must be an integer from 0 to ${LIST_OFFSET_MAX} (default 0), given once`
const TEXT_RULE = 'characters, without NUL or unpaired surrogate characters, given once'
const LIST_RULES: Record<string, string> = {
  '/q': `q must be 1 to ${LIST_Q_MAX} ${TEXT_RULE}`,
  '/app': `app must be an app name: 1 to ${APP_NAME_MAX} ${TEXT_RULE}`,
  '/state': 'state must be running or stopped, given once',
  '/failing': 'failing must be true or false, given once',
  '/sort': `sort must be one of ${LIST_SORTS.join(', ')} (default id), given once`,
  '/order': 'order must be asc or desc (default asc), given once',
  '/offset': OFFSET_RULE
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
  }, (request, reply) => {
    // The busiest route: one promise (the answer's) and no async function around it. Fastify sends
    // a rejection as an error, as it would an async handler's.
    return polling.reads.statusJson(request.params.reaktorId, reply).then((json) => {
      sendJsonNow(reply, json)
    })
  })

  fastify.get('/polling', {
    schemaErrorFormatter: pagingErrors(LIMIT_RULE, () => 'before is not a parameter of this list', LIST_RULES),
    preValidation: digitsOnly({ limit: LIMIT_RULE, offset: OFFSET_RULE }),
    schema: {
      tags: ['polling'],
      operationId: 'listPollingReaktors',
      summary: 'Registered polling reaktors with their status: all, or a page filtered and sorted',
      description: 'Without query parameters: every registered polling reaktor, sorted by id (`pollingReaktors` only). With any of ' +
        '`q`, `state`, `failing`, `app`, `sort`, `order`, `limit`, `offset`: the page of the matching reaktors in that order, with ' +
        '`total` (how many match), `offset`, `limit` and `counts` (over every registered reaktor, not only the matching ones). ' +
        'Filters combine (all must hold). Nulls sort last in both orders and ties go by id, ascending, so pages are stable: ' +
        'paging with `offset` lists each matching reaktor once while no state changes. Text sorts by code unit.',
      querystring: PollingListQuery,
      response: {
        200: described(PollingList, 'Every registered polling reaktor with its status, or the page asked for'),
        400: described(ErrorBody, 'A bad query parameter: the message names it and says what is allowed'),
        401: ErrorBody,
        500: ErrorBody,
        503: ErrorBody
      }
    }
  }, async (request, reply) => {
    const query = request.query
    if (!LIST_QUERY_PARAMS.some((name) => query[name] !== undefined)) return await sendJson(reply, await polling.reads.listJson(reply))
    const page = {
      q: query.q,
      state: query.state,
      failing: query.failing === undefined ? undefined : query.failing === 'true',
      app: query.app,
      sort: query.sort ?? 'id',
      order: query.order ?? 'asc',
      limit: query.limit ?? LIST_LIMIT.default,
      offset: query.offset ?? 0
    }
    return await sendJson(reply, await polling.reads.listPageJson(page, reply))
  })
}
export default routes
