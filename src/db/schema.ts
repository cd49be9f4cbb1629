import type { ColumnType, Generated, Selectable } from 'kysely'

/** The tables of the service, as Kysely sees them. Migrations in ./migrations create them. */
export interface Database {
  users: UsersTable
  sessions: SessionsTable
  polling_reaktors: PollingReaktorsTable
  reaktor_cluster: ReaktorClusterTable
  reaktor_partitions: ReaktorPartitionsTable
  reaktor_nodes: ReaktorNodesTable
  session_token_key: SessionTokenKeyTable
  polling_runs: PollingRunsTable
  api_tokens: ApiTokensTable
  audit: AuditTable
  app_packages: AppPackagesTable
  apps: AppsTable
  app_node_states: AppNodeStatesTable
}

export interface UsersTable {
  id: Generated<string>
  username: string
  /** What names are compared by, unique: usernameKey(username) (src/lib/user-rules.ts). */
  username_key: string
  /** `scrypt$N$r$p$salt$hash` (base64 parts); never the password. */
  password_hash: string
  created_at: ColumnType<Date, Date | undefined, never>
  role: ColumnType<Role, Role | undefined, Role>
  /** Set while the user is disabled: no login, no session, no token works. */
  disabled_at: Date | null
  updated_at: ColumnType<Date, Date | undefined, Date>
}

/** `admin`: everything; `operator`: everything except managing other users and their tokens. */
export type Role = 'admin' | 'operator'

/** An API token for scripts (src/auth/api-tokens.ts); revoking one deletes its row. */
export interface ApiTokensTable {
  id: Generated<string>
  user_id: string
  name: string
  /** SHA-256 of the token, like sessions.token_hash. */
  token_hash: Buffer
  created_at: ColumnType<Date, Date | undefined, never>
  /** Updated at most once a minute per token. */
  last_used_at: Date | null
  /** Null: never expires. */
  expires_at: Date | null
}

/** One privileged action (src/audit/record.ts); pruned after AUDIT_RETENTION. */
export interface AuditTable {
  /** Insertion order: the API reads newest first by id. */
  id: ColumnType<string, never, never>
  at: ColumnType<Date, Date | undefined, never>
  action: string
  /** Username of who acted; null for the service itself. */
  actor: string | null
  /** Client address of the request, when it came over HTTP. */
  address: string | null
  /** NODE_ID of the node that took the request. */
  node: string
  /** What was acted on: reaktor ids, a username, a token id. */
  targets: ColumnType<string[], string[] | undefined, never>
  details: ColumnType<Record<string, unknown>, string | undefined, never>
}

export interface SessionsTable {
  id: Generated<string>
  user_id: string
  /** SHA-256 of the session token: a database dump never yields a usable token. */
  token_hash: Buffer
  created_at: ColumnType<Date, Date | undefined, never>
  expires_at: Date
  revoked_at: Date | null
  /** Its token carries a tag (src/auth/token-tag.ts); false for rows written by earlier versions. */
  tagged: ColumnType<boolean, boolean | undefined, boolean>
}

/** The persisted state record of a polling reaktor (the status fields docs/operating.md lists, plus scheduler bookkeeping). */
export interface PollingReaktorsTable {
  reaktor_id: string
  state: 'running' | 'stopped'
  interval: string
  last_run: Date | null
  next_run: Date | null
  updated_at: ColumnType<Date, Date | undefined, Date>
  last_error: string | null
  consecutive_failures: ColumnType<number, number | undefined, number>
  /** NODE_ID of the node running it, null when nobody does. */
  owner: string | null
  /** Grows with every state change; run results apply only under the version they ran in. */
  state_version: ColumnType<string, string | number | undefined, string | number>
  /** Run id of `last_run`. */
  last_run_id: string | null
  /** The partition of the id (written by the nodes that register it); null until one has. */
  partition: number | null
  /** A run passed its timeout and has not settled yet: no other run of it starts until it does. */
  blocked: ColumnType<boolean, boolean | undefined, boolean>
  /** When the last run that succeeded (`more_work`/`no_work`) started. */
  last_success_at: Date | null
  /** When the last run that failed (or timed out) started; `last_error` is its message. */
  last_failure_at: Date | null
  last_duration_ms: number | null
  last_outcome: RunOutcomeName | null
  /** A run in flight started then (written for runs still in flight at a flush); null otherwise. */
  running_since: Date | null
  /** When a run was last requested (run now); pending while later than `last_run`. */
  run_requested_at: Date | null
}

/** How a run ended, as history and status name it. */
export type RunOutcomeName = 'more_work' | 'no_work' | 'failed' | 'timed_out' | 'aborted'

/** One run of a polling reaktor (run history, pruned per reaktor to RUN_HISTORY_PER_REAKTOR rows). */
export interface PollingRunsTable {
  /** Insertion order: breaks ties between runs that started in the same millisecond. */
  seq: ColumnType<string, never, never>
  run_id: string
  reaktor_id: string
  /** NODE_ID of the node that ran it. */
  node: string
  started_at: Date
  /** Null only while a timed-out run has not settled. */
  duration_ms: number | null
  outcome: RunOutcomeName
  /** The failure's message (bounded), null for successes. */
  error: string | null
}

/** One row: the key session tokens are tagged with (src/auth/token-tag.ts). */
export interface SessionTokenKeyTable {
  id: ColumnType<number, number | undefined, never>
  key: Buffer
  /** Tokens without a valid tag are looked up until then (sessions of the earlier token format). */
  untagged_until: Date | null
}

/** One row: the partition count of this cluster, fixed at its first start. */
export interface ReaktorClusterTable {
  id: ColumnType<number, number | undefined, never>
  partitions: number
  partition_hash: string
  created_at: ColumnType<Date, Date | undefined, never>
}

export interface ReaktorPartitionsTable {
  partition: number
  /** Grows with every takeover: writes under an older generation no longer move the schedule. */
  generation: ColumnType<string, string | number | undefined, string | number>
  /** NODE_ID of the node that took it last; shown only while its lock is held. */
  owner: string | null
}

/** What each node registers, keyed by its lock session (for clusters whose nodes load different apps). */
export interface ReaktorNodesTable {
  lock_pid: number
  node_id: string
  fingerprint: string
  registered: string[]
  joined_at: ColumnType<Date, Date | undefined, never>
}

/** A published version of a reaktor app: its npm tarball, immutable once stored. */
export interface AppPackagesTable {
  name: string
  version: string
  /** Hex SHA-256 of `bytes`. */
  sha256: string
  /** Bytes of the tarball (compressed). */
  size: number
  unpacked_size: ColumnType<string, number | bigint | string, never>
  entries: number
  /** The archive's package.json. */
  manifest: ColumnType<Record<string, unknown>, string, never>
  bytes: ColumnType<Buffer, Buffer, never>
  published_at: ColumnType<Date, Date | undefined, never>
  /** The username of who published it (null: published without a user, e.g. by the service itself). */
  published_by: string | null
}

/** A published app: the version every node should run. */
export interface AppsTable {
  name: string
  active_version: string
  changed_at: ColumnType<Date, Date | undefined, Date>
  changed_by: string | null
}

/** What one node runs of one published app, and why not the active version when it does not. */
export interface AppNodeStatesTable {
  node_id: string
  name: string
  version: string | null
  since: Date | null
  error: string | null
  updated_at: ColumnType<Date, Date | undefined, Date>
}

export type User = Selectable<UsersTable>
export type PollingReaktorRow = Selectable<PollingReaktorsTable>
export type PollingRunRow = Selectable<PollingRunsTable>
