import { Type, type Static } from 'typebox'
import { StoredText } from './common.js'

export const ReaktorIdParams = Type.Object({
  reaktorId: StoredText({ minLength: 1, description: 'The reaktorDefinitionId of a registered polling reaktor' })
})

export const MessageBody = Type.Object({
  message: Type.String()
})

const Timestamp = Type.Union([Type.String({ format: 'date-time' }), Type.Null()])

/** `state`, `interval`, `lastRun`, `nextRun`, plus the extras the README's "Operating polling reaktors" lists. */
export const PollingStatus = Type.Object({
  reaktorDefinitionId: Type.String(),
  state: Type.Union([Type.Literal('running'), Type.Literal('stopped')]),
  interval: Type.String({ description: 'The registered interval string' }),
  effectiveInterval: Type.String({ description: 'The interval actually used: at least the 3s minimum, e.g. "3s"' }),
  lastRun: Timestamp,
  nextRun: Timestamp,
  updatedAt: Timestamp,
  label: Type.Union([Type.String(), Type.Null()]),
  description: Type.Union([Type.String(), Type.Null()]),
  autoStart: Type.Boolean(),
  lastError: Type.Union([Type.String(), Type.Null()]),
  consecutiveFailures: Type.Integer({ minimum: 0 }),
  blocked: Type.Boolean({ description: 'A run passed its timeout and has not settled yet (its aktor ignores its signal): no other run of this reaktor starts until it does' }),
  owner: Type.Union([Type.String(), Type.Null()], { description: 'NODE_ID of the node running it' })
})
export type PollingStatusType = Static<typeof PollingStatus>

export const PollingList = Type.Object({
  pollingReaktors: Type.Array(PollingStatus)
})
