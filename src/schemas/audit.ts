import { Type, type Static } from 'typebox'
import { PageLimitParam, StoredText } from './common.js'
import { AUDIT_LIMIT } from './page-limits.js'

/** One audit row: registered once (fastify.addSchema), referenced by the page and listed in the OpenAPI components. */
export const AuditEntry = Type.Object({
  id: Type.Integer({ description: 'Increases with every row written: the order of the log' }),
  at: Type.String({ format: 'date-time', description: 'When the action was recorded (ISO 8601, UTC)' }),
  action: Type.String({ description: 'What was done, e.g. polling.start, auth.login_failed, user.create' }),
  actor: Type.Union([Type.String(), Type.Null()], { description: 'Username of who acted (for a failed login, the username tried, at most 64 characters); null for the service itself' }),
  address: Type.Union([Type.String(), Type.Null()], { description: 'Client address of the request (with TRUST_PROXY, the forwarded one); null for the service itself' }),
  node: Type.String({ description: 'NODE_ID of the node that took the request' }),
  targets: Type.Array(Type.String(), { description: 'What was acted on: reaktor ids, a username, a token id' }),
  details: Type.Object({}, { additionalProperties: true, description: 'What the action changed or found, per action' })
}, { $id: 'AuditEntry', title: 'AuditEntry', description: 'One privileged action' })
export type AuditEntryType = Static<typeof AuditEntry>

export const AuditQuery = Type.Object({
  limit: PageLimitParam(AUDIT_LIMIT, 'entries'),
  before: Type.Optional(StoredText({ minLength: 1, maxLength: 100, description: 'Only entries older than this: the nextBefore of a previous page (an opaque cursor)' })),
  action: Type.Optional(StoredText({ minLength: 1, maxLength: 100, description: 'Only entries of this action (exact)' })),
  actor: Type.Optional(StoredText({ minLength: 1, maxLength: 200, description: 'Only entries of this actor (a username, without regard to case)' }))
})

export const AuditPage = Type.Object({
  entries: Type.Array(Type.Unsafe<AuditEntryType>(Type.Ref('AuditEntry')), { description: 'Newest first' }),
  nextBefore: Type.Union([Type.String(), Type.Null()], {
    description: 'Pass as `before` (with the same filters) for the next, older page; null when there was no older entry at the time of the read'
  })
})
