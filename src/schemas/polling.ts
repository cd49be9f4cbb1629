import { Type, type Static, type TInteger, type TEnum, type TString } from 'typebox'
import { StoredText } from './common.js'
import { LIST_LIMIT } from './page-limits.js'
import { PACKAGE_NAME_MAX } from '../apps/loader.js'

/** The router's limit on a path parameter (longer answers 414): the bulk routes take ids up to it too. */
export const MAX_ID_PARAM_LENGTH = 1024

export const ReaktorIdParams = Type.Object({
  reaktorId: StoredText({ minLength: 1, maxLength: MAX_ID_PARAM_LENGTH, description: 'The reaktorDefinitionId of a registered polling reaktor' })
})

/** The answer of a single start, stop or run-now: registered once, the OpenAPI component Message. */
export const MessageSchema = Type.Object({
  message: Type.String({ description: 'What happened, naming the reaktor' })
}, { $id: 'Message', title: 'Message' })
export const MessageBody = Type.Unsafe<Static<typeof MessageSchema>>(Type.Ref('Message'))

const Timestamp = Type.Union([Type.String({ format: 'date-time' }), Type.Null()])

/** How a run ended: the names of run history and status. */
export const RunOutcome = Type.Union(
  [Type.Literal('more_work'), Type.Literal('no_work'), Type.Literal('failed'), Type.Literal('timed_out'), Type.Literal('aborted')],
  { description: 'more_work: returned true (runs again at once); no_work: returned false (waits one interval); failed: threw, rejected or returned a non-boolean; timed_out: passed its timeout; aborted: its signal was aborted first (a stop, a shutdown, a node that lost its lock)' }
)

/** `state`, `interval`, `lastRun`, `nextRun`, plus the extras docs/operating.md, "Operating polling reaktors", lists. */
export const PollingStatusSchema = Type.Object({
  reaktorDefinitionId: Type.String(),
  app: Type.String({ description: 'The name of the app that registers it (what the bulk routes\' `app` names)' }),
  state: Type.Union([Type.Literal('running'), Type.Literal('stopped')]),
  interval: Type.String({ description: 'The registered interval string' }),
  effectiveInterval: Type.String({ description: 'The interval actually used: at least the 3s minimum, e.g. "3s"' }),
  lastRun: Timestamp,
  nextRun: Timestamp,
  updatedAt: Timestamp,
  label: Type.Union([Type.String(), Type.Null()]),
  description: Type.Union([Type.String(), Type.Null()]),
  autoStart: Type.Boolean(),
  lastError: Type.Union([Type.String(), Type.Null()], { description: 'The message of the last run that failed or timed out (the one of lastFailureAt), kept after later successes until the next failure: consecutiveFailures says whether the latest runs fail' }),
  consecutiveFailures: Type.Integer({ minimum: 0 }),
  blocked: Type.Boolean({ description: 'A run passed its timeout and has not settled yet (its aktor ignores its signal): no other run of this reaktor starts until it does' }),
  owner: Type.Union([Type.String(), Type.Null()], { description: 'NODE_ID of the node running it' }),
  lastSuccessAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'When the last run that succeeded (returned true or false) started; null: none yet' }),
  lastFailureAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'When the last run that failed or timed out started; lastError is its message' }),
  lastDurationMs: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], { description: 'How long the latest run whose result counted took, in milliseconds' }),
  lastOutcome: Type.Union([RunOutcome, Type.Null()], { description: 'How the latest run whose result counted ended (a run whose result a stop discarded is in the run history only); null: none yet' }),
  runningSince: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'A run is in flight and started then; shown only while a live node holds the reaktor, null otherwise' })
}, { $id: 'PollingStatus', title: 'PollingStatus', description: 'The status of a polling reaktor' })
export type PollingStatusType = Static<typeof PollingStatusSchema>

/** A reference to the one status schema (registered once, the OpenAPI component PollingStatus). */
export const PollingStatus = Type.Unsafe<PollingStatusType>(Type.Ref('PollingStatus'))

export const LIST_Q_MAX = 200
/** Far past any list: an answer never has to print a number beyond what JSON integers hold exactly. */
export const LIST_OFFSET_MAX = 1_000_000_000
/** An app name as the bulk routes take it (package.json `name`). */
export const APP_NAME_MAX = PACKAGE_NAME_MAX
export const AppName = (description: string): TString => StoredText({ minLength: 1, maxLength: APP_NAME_MAX, description })

/** The columns a page of the list sorts by: status fields (`id`: reaktorDefinitionId). */
export const LIST_SORTS = ['id', 'label', 'app', 'state', 'interval', 'lastRun', 'nextRun', 'lastSuccessAt', 'consecutiveFailures', 'owner', 'lastOutcome'] as const

function Words<const T extends string[]> (words: readonly [...T], description: string): TEnum<T> {
  return Type.Enum(words, { type: 'string', description })
}

/**
 * `GET /polling` with any of these answers one page (PollingList with total, offset, limit and
 * counts); without any, the whole list as before. No `default`s here: the validator would fill
 * them in, and a request without parameters could not be told apart.
 */
export const PollingListQuery = Type.Object({
  q: Type.Optional(StoredText({ minLength: 1, maxLength: LIST_Q_MAX, description: 'Only reaktors whose id, label or app name contains this text, without regard to case' })),
  state: Type.Optional(Words(['running', 'stopped'], 'Only reaktors in this state')),
  failing: Type.Optional(Words(['true', 'false'], 'true: only reaktors whose latest runs fail (consecutiveFailures > 0); false: only the others')),
  app: Type.Optional(AppName('Only the reaktors of this app (its name, exact)')),
  sort: Type.Optional(Words(LIST_SORTS, 'The status field to sort by (default id; `id` is reaktorDefinitionId, `interval` the registered interval by length). Nulls sort last in both orders; ties by id, ascending')),
  order: Type.Optional(Words(['asc', 'desc'], 'Sort order (default asc)')),
  limit: Type.Optional(Type.Integer({ minimum: LIST_LIMIT.min, maximum: LIST_LIMIT.max, description: `How many reaktors per page, ${LIST_LIMIT.min} to ${LIST_LIMIT.max} (default ${LIST_LIMIT.default})` })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: LIST_OFFSET_MAX, description: `How many matching reaktors to skip, 0 to ${LIST_OFFSET_MAX} (default 0)` }))
})
export const LIST_QUERY_PARAMS = Object.keys(PollingListQuery.properties) as Array<keyof Static<typeof PollingListQuery>>

const Count = (description: string): TInteger => Type.Integer({ minimum: 0, description })

export const PollingList = Type.Object({
  pollingReaktors: Type.Array(PollingStatus, { description: 'Without query parameters: every registered reaktor, sorted by reaktorDefinitionId. With any: the page asked for' }),
  total: Type.Optional(Count('With query parameters: how many reaktors match the filters (all pages)')),
  offset: Type.Optional(Count('With query parameters: the offset of this page')),
  limit: Type.Optional(Count('With query parameters: the limit of this page')),
  counts: Type.Optional(Type.Object({
    all: Count('Every registered reaktor'),
    running: Count('Those running'),
    stopped: Count('Those stopped'),
    failing: Count('Those whose latest runs fail (consecutiveFailures > 0)')
  }, { description: 'With query parameters: counts over every registered reaktor, regardless of the filters' }))
})
