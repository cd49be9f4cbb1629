import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { MAX_REAKTOR_ID_LENGTH } from '../apps/registry.js'
import { isChange } from '../scheduler/index.js'
import { described, ErrorBody } from '../schemas/common.js'
import { strict, strictJsonBodies } from './json-body.js'
import { BULK_BODY_LIMIT, BulkAnswer, BulkByApp, BulkByIds, BulkSelection, type BulkSelectionType } from '../schemas/polling-bulk.js'

/*
 * The body is checked without coercion and without dropping unknown properties (json-body.ts), so
 * `{"ids": [...], "app": "x"}` and `{"ids": "a"}` are 400, and the message says which rule failed.
 */
const byIds = strict.compile(BulkByIds)
const byApp = strict.compile(BulkByApp)

/**
 * The unknown ids an audit line names: a few, cut to the longest id that can be registered. All of
 * them (10,000 of 1,024 characters) would let a request pad the line to megabytes, which log
 * pipelines split or drop: the action it records with it.
 */
const AUDIT_NOT_FOUND = 10

function auditNotFound (notFound: string[]): { notFound: string[], notFoundCount?: number } {
  const named = notFound.slice(0, AUDIT_NOT_FOUND).map((id) => [...id].slice(0, MAX_REAKTOR_ID_LENGTH).join(''))
  return notFound.length > AUDIT_NOT_FOUND ? { notFound: named, notFoundCount: notFound.length } : { notFound: named }
}

type Checked = { value: BulkSelectionType } | { error: Error }

/** Fastify marks what a validator returns as `error` a 400 validation error. */
function invalid (message: string): Checked {
  return { error: new Error(message) }
}

function checkSelection (body: unknown): Checked {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return invalid('body must be an object with exactly one of "ids" or "app"')
  const keys = Object.keys(body)
  if (keys.some((k) => k !== 'ids' && k !== 'app')) return invalid('body must NOT have additional properties; expected exactly one of "ids" or "app"')
  if (keys.length !== 1) return invalid(`body must have exactly one of "ids" or "app"${keys.length === 0 ? '' : ', not both'}`)
  const validate = keys[0] === 'ids' ? byIds : byApp
  if (!validate(body)) return invalid(strict.errorsText(validate.errors, { dataVar: 'body' }))
  return { value: body as BulkSelectionType }
}

/** `POST /polling/start` and `/polling/stop`: many reaktors, by id or by app, in one transaction. */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  const { polling } = fastify
  strictJsonBodies(fastify)

  /** Every polling reaktor of the loaded versions of an app, sorted by id. */
  const appReaktors = (name: string): string[] => {
    const apps = fastify.apps.apps.filter((a) => a.name === name)
    if (apps.length === 0) throw fastify.httpErrors.notFound(`App "${name}" is not loaded`)
    const ids = apps.flatMap((a) => a.pollingReaktors.map((r) => r.reaktorDefinitionId)).sort()
    if (ids.length === 0) throw fastify.httpErrors.badRequest(`App "${name}" has no polling reaktors`)
    return ids
  }

  for (const action of ['start', 'stop'] as const) {
    fastify.post(`/polling/${action}`, {
      bodyLimit: BULK_BODY_LIMIT,
      validatorCompiler: () => checkSelection,
      schema: {
        tags: ['polling'],
        operationId: action === 'start' ? 'bulkStartPollingReaktors' : 'bulkStopPollingReaktors',
        summary: `${action === 'start' ? 'Start' : 'Stop'} many polling reaktors at once (idempotent, one transaction)`,
        description: 'Selects reaktors by `ids` or by `app`. The known ones are written in one transaction; ids not registered are named in `notFound` and change nothing.',
        body: BulkSelection,
        response: {
          200: described(BulkAnswer, 'Applied to every registered reaktor selected (one transaction); the result of each, unknown ids named'),
          400: ErrorBody,
          401: ErrorBody,
          404: described(ErrorBody, 'The app is not loaded'),
          413: described(ErrorBody, `The body is larger than ${BULK_BODY_LIMIT} bytes`),
          415: described(ErrorBody, 'The body is not application/json'),
          500: described(ErrorBody, 'Nothing was changed: the transaction failed (the node logs why)'),
          503: described(ErrorBody, 'Nothing was changed: the database is unavailable; retry shortly')
        }
      }
    }, async (request) => {
      const selection = request.body
      const ids = 'ids' in selection ? selection.ids : appReaktors(selection.app)
      const outcomes = await polling.bulk(action, ids)
      const changed: string[] = []
      const unchanged: string[] = []
      const notFound: string[] = []
      for (const o of outcomes) (o.result === 'not_found' ? notFound : isChange(o.result) ? changed : unchanged).push(o.reaktorId)
      await fastify.audit(request, {
        action: action === 'start' ? 'polling.bulk_start' : 'polling.bulk_stop',
        targets: outcomes.filter((o) => o.result !== 'not_found').map((o) => o.reaktorId),
        details: { ...('app' in selection ? { app: selection.app } : {}), changed, unchanged, ...auditNotFound(notFound) }
      })
      return {
        action,
        results: outcomes.map((o) => ({ reaktorDefinitionId: o.reaktorId, result: o.result })),
        changed: changed.length,
        unchanged: unchanged.length,
        notFound
      }
    })
  }
}
export default routes
