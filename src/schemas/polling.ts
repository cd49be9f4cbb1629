import { Type, type Static } from 'typebox'
import { StoredText } from './common.js'

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

/** `state`, `interval`, `lastRun`, `nextRun`, plus the extras the README's "Operating polling reaktors" lists. */
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

export const PollingList = Type.Object({
  pollingReaktors: Type.Array(PollingStatus, { description: 'Sorted by reaktorDefinitionId' })
})
