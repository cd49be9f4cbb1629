import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifySchemaValidationError } from 'fastify/types/schema.js'
import { RunHistory } from '../polling/history.js'
import { loadHistoryCursors, TIMESTAMP_FORM } from '../polling/history-cursor.js'
import { described, ErrorBody, UnknownReaktorAnswer } from '../schemas/common.js'
import { ReaktorIdParams } from '../schemas/polling.js'
import { HISTORY_LIMIT, RunHistoryPage, RunHistoryQuery } from '../schemas/polling-runs.js'

const LIMIT_RULE = `limit must be an integer from ${HISTORY_LIMIT.min} to ${HISTORY_LIMIT.max} (default ${HISTORY_LIMIT.default})`
const BEFORE_FORMS = `the nextBefore of a previous page, or ${TIMESTAMP_FORM}`

/**
 * A query error says what is allowed rather than which schema keyword failed (a repeated `limit`
 * reads as an array, which "must be integer" would not explain); other errors read as Fastify's own.
 */
function historyErrors (errors: FastifySchemaValidationError[], dataVar: string): Error {
  const first = errors[0]
  if (dataVar === 'querystring' && first?.instancePath === '/limit') return new Error(LIMIT_RULE)
  // Only a repeated `before` (read as an array) fails its type; an empty, over-long or NUL value its form.
  if (dataVar === 'querystring' && first?.instancePath === '/before') return new Error(`before must be ${first.keyword === 'type' ? 'given once: ' : ''}${BEFORE_FORMS}`)
  return new Error(errors.map((e) => `${dataVar}${e.instancePath} ${e.message ?? 'is invalid'}`).join(', '))
}

/** `GET /polling/{id}/runs`: a reaktor's run history, newest first, paged by cursor. */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  const { config, db } = fastify
  const history = new RunHistory(db, await loadHistoryCursors(db), fastify.apps.pollingReaktors, config.runHistoryPerReaktor > 0)

  fastify.get('/polling/:reaktorId/runs', {
    schemaErrorFormatter: historyErrors,
    // The validator coerces the text to a number, which would take "0x10", "1e2" or " 10" for one.
    preValidation: async (request) => {
      const { limit } = request.query as Record<string, unknown>
      if (typeof limit === 'string' && !/^[0-9]+$/.test(limit)) throw fastify.httpErrors.badRequest(LIMIT_RULE)
    },
    schema: {
      tags: ['polling'],
      operationId: 'listPollingRuns',
      summary: 'Run history of a polling reaktor, newest first',
      description: 'The runs of a reaktor as recorded by the nodes that ran them (read from the database: the same on every node), ' +
        'newest first. Page with `before`: pass the `nextBefore` of the previous answer until it is null. Paging neither repeats nor ' +
        'skips a run while new runs are recorded or old ones pruned. `before` also takes an ISO 8601 date-time: the runs that started ' +
        'strictly before it. How many runs are kept per reaktor is RUN_HISTORY_PER_REAKTOR.',
      params: ReaktorIdParams,
      querystring: RunHistoryQuery,
      response: { 200: described(RunHistoryPage, 'A page of runs, newest first'), 400: ErrorBody, 401: ErrorBody, 404: UnknownReaktorAnswer, 500: ErrorBody, 503: ErrorBody }
    }
  }, async (request) => {
    const { limit = HISTORY_LIMIT.default, before } = request.query
    const page = await history.page(request.params.reaktorId, limit, before)
    if ('invalid' in page) throw fastify.httpErrors.badRequest(page.invalid)
    return page
  })
}
export default routes
