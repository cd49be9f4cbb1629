import { Type, type Static } from 'typebox'
import { MAX_REAKTOR_ID_LENGTH } from '../apps/registry.js'
import { AppName, ReaktorIdParams } from './polling.js'

/** The most ids one bulk request may name. */
const MAX_BULK_IDS = 10_000

/**
 * The largest body of a bulk request: room for MAX_BULK_IDS of the longest registrable ids, each
 * character taking up to 3 bytes of UTF-8, plus quotes and commas, and the 64 KiB every other
 * request may send. A registered selection always fits; only longer made-up ids can reach the limit.
 */
export const BULK_BODY_LIMIT = MAX_BULK_IDS * (MAX_REAKTOR_ID_LENGTH * 3 + 3) + 64 * 1024

/** An id as the single routes take it in their path: no NUL, no lone surrogate, 1 to 1024 characters. */
const ReaktorId = ReaktorIdParams.properties.reaktorId

export const BulkByIds = Type.Object({
  ids: Type.Array(ReaktorId, { minItems: 1, maxItems: MAX_BULK_IDS, uniqueItems: true, description: `The reaktorDefinitionIds to act on, each once (1 to ${MAX_BULK_IDS})` })
}, { additionalProperties: false })

export const BulkByApp = Type.Object({
  app: AppName('An app name (package.json `name`, every loaded version): all of its polling reaktors')
}, { additionalProperties: false })

/** `POST /api/v1/polling/start|stop`: exactly one of `ids` or `app`. */
export const BulkSelection = Type.Union([BulkByIds, BulkByApp], { description: 'Exactly one of `ids` or `app`; nothing else' })
export type BulkSelectionType = Static<typeof BulkSelection>

const Result = Type.Union([Type.Literal('started'), Type.Literal('already_running'), Type.Literal('stopped'), Type.Literal('already_stopped'), Type.Literal('not_found')])

export const BulkAnswer = Type.Object({
  action: Type.Union([Type.Literal('start'), Type.Literal('stop')]),
  results: Type.Array(Type.Object({ reaktorDefinitionId: Type.String(), result: Result }), {
    description: 'One per reaktor, in request order (for `app`: sorted by id)'
  }),
  changed: Type.Integer({ minimum: 0, description: 'How many were started (stopped)' }),
  unchanged: Type.Integer({ minimum: 0, description: 'How many were already running (stopped)' }),
  notFound: Type.Array(Type.String(), { description: 'The ids not registered: nothing was written for them' })
})
