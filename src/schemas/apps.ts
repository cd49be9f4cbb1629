import { Type } from 'typebox'
import { PACKAGE_NAME_MAX, PACKAGE_VERSION_MAX } from '../apps/loader.js'

const Timestamp = Type.String({ format: 'date-time' })
const NullableTimestamp = Type.Union([Timestamp, Type.Null()])
const Username = Type.Union([Type.String(), Type.Null()], { description: 'Who did it (null: the service itself)' })

/** An app name as npm writes it, scoped names too (`@scope/name`, percent-encoded in a path). */
export const AppNameParams = Type.Object({
  name: Type.String({ minLength: 1, maxLength: PACKAGE_NAME_MAX, description: 'The app (package) name' })
})

export const AppVersionParams = Type.Object({
  name: Type.String({ minLength: 1, maxLength: PACKAGE_NAME_MAX, description: 'The app (package) name' }),
  version: Type.String({ minLength: 1, maxLength: PACKAGE_VERSION_MAX, description: 'A published version of it' })
})

export const PublishQuery = Type.Object({
  activate: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')], { description: 'false: store the version without switching to it (default true)' }))
}, { additionalProperties: false })

export const ActivateBody = Type.Object({
  version: Type.String({ minLength: 1, maxLength: PACKAGE_VERSION_MAX, description: 'A published version of the app' })
}, { additionalProperties: false })

const ThisNode = Type.Object({
  nodeId: Type.String(),
  version: Type.Union([Type.String(), Type.Null()], { description: 'What the node that answered runs of the app now' }),
  error: Type.Union([Type.String(), Type.Null()], { description: 'Why it does not run the active version (the other nodes may)' })
}, { description: 'The node that answered, once it has switched (the others follow the NOTIFY)' })

export const Published = Type.Object({
  name: Type.String(),
  version: Type.String(),
  sha256: Type.String({ description: 'SHA-256 of the package, hex' }),
  size: Type.Integer({ description: 'Bytes of the package as uploaded' }),
  stored: Type.Boolean({ description: 'false: this version was already stored with these bytes (nothing changed)' }),
  activated: Type.Boolean({ description: 'The active version changed to it' }),
  previous: Type.Union([Type.String(), Type.Null()], { description: 'The version active before' }),
  thisNode: ThisNode
})

export const Activated = Type.Object({
  name: Type.String(),
  version: Type.String(),
  previous: Type.Union([Type.String(), Type.Null()]),
  changed: Type.Boolean({ description: 'false: it was already the active version' }),
  thisNode: ThisNode
})

export const Deleted = Type.Object({ message: Type.String() })

export const AppSummary = Type.Object({
  name: Type.String(),
  activeVersion: Type.Union([Type.String(), Type.Null()]),
  changedAt: NullableTimestamp,
  changedBy: Username,
  versions: Type.Integer(),
  latestPublishedAt: NullableTimestamp
})

export const AppList = Type.Object({ apps: Type.Array(AppSummary) })

export const AppVersion = Type.Object({
  version: Type.String(),
  sha256: Type.String(),
  size: Type.Integer(),
  unpackedSize: Type.Integer(),
  entries: Type.Integer(),
  publishedAt: Timestamp,
  publishedBy: Username
})

export const NodeState = Type.Object({
  nodeId: Type.String(),
  version: Type.Union([Type.String(), Type.Null()], { description: 'What the node runs of the app (null: none)' }),
  since: NullableTimestamp,
  error: Type.Union([Type.String(), Type.Null()], { description: 'Why the node does not run the active version' }),
  updatedAt: Timestamp
})

export const AppDetails = Type.Object({
  name: Type.String(),
  activeVersion: Type.Union([Type.String(), Type.Null()]),
  changedAt: NullableTimestamp,
  changedBy: Username,
  versions: Type.Array(AppVersion, { description: 'Newest first' }),
  nodes: Type.Array(NodeState)
})
