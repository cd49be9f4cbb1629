import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { RunHistory } from '../polling/history.js'
import { loadHistoryCursors, TIMESTAMP_FORM } from '../polling/history-cursor.js'
import { described, ErrorBody, UnknownReaktorAnswer } from '../schemas/common.js'
import { ReaktorIdParams } from '../schemas/polling.js'
import { HISTORY_LIMIT } from '../schemas/page-limits.js'
import { RunHistoryPage, RunHistoryQuery } from '../schemas/polling-runs.js'
import { digitsOnly, limitRule, pagingErrors } from './paging.js'

const LIMIT_RULE = limitRule(HISTORY_LIMIT)
const BEFORE_FORMS = `the nextBefore of a previous page, or ${TIMESTAMP_FORM}`
// Only a repeated `before` (read as an array) fails its type; an empty, over-long or NUL value its form.
const historyErrors = pagingErrors(LIMIT_RULE, (error) => `before must be ${error.keyword === 'type' ? 'given once: ' : ''}${BEFORE_FORMS}`)

/** `GET /polling/{id}/runs`: a reaktor's run history, newest first, paged by cursor. */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  const { config, db } = fastify
  const history = new RunHistory(db, await loadHistoryCursors(db), fastify.apps.pollingReaktors, config.runHistoryPerReaktor > 0)

  fastify.get('/polling/:reaktorId/runs', {
    schemaErrorFormatter: historyErrors,
    preValidation: digitsOnly({ limit: LIMIT_RULE }),
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
