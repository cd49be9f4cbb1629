import { Type, type Static } from 'typebox'
import { PageLimitParam, StoredText } from './common.js'
import { HISTORY_LIMIT } from './page-limits.js'
import { RunOutcome } from './polling.js'

/** One run: registered once (SHARED_SCHEMAS), referenced by the history answer and listed in the OpenAPI components. */
export const PollingRun = Type.Object({
  runId: Type.String({ format: 'uuid', description: 'The run\'s id, as the aktor saw it in context.runId' }),
  reaktorDefinitionId: Type.String(),
  node: Type.String({ description: 'NODE_ID of the node that ran it' }),
  startedAt: Type.String({ format: 'date-time', description: 'When the run started (ISO 8601, UTC)' }),
  durationMs: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], { description: 'How long it ran; null while a run that passed its timeout has not settled' }),
  outcome: RunOutcome,
  error: Type.Union([Type.String(), Type.Null()], { description: 'Why it failed, timed out or was aborted; null for a success' })
}, { $id: 'PollingRun', title: 'PollingRun', description: 'One run of a polling reaktor' })
export type PollingRunType = Static<typeof PollingRun>

export const RunHistoryQuery = Type.Object({
  limit: PageLimitParam(HISTORY_LIMIT, 'runs'),
  before: Type.Optional(StoredText({
    minLength: 1,
    maxLength: 100,
    description: 'Only runs older than this: the nextBefore of a previous page (an opaque cursor), or an ISO 8601 date-time with a time zone (runs that started strictly before it)'
  }))
})

export const RunHistoryPage = Type.Object({
  runs: Type.Array(Type.Unsafe<PollingRunType>(Type.Ref('PollingRun')), { description: 'Newest first: by start time, then by the order the runs were recorded' }),
  nextBefore: Type.Union([Type.String(), Type.Null()], {
    description: 'Pass as `before` for the next (older) page; null when there was no older run at the time of the read'
  })
})
