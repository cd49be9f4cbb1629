import type { ColumnType, Generated, Selectable } from 'kysely'

/** The tables of the service, as Kysely sees them. Migrations in ./migrations create them. */
export interface Database {
  users: UsersTable
  sessions: SessionsTable
  polling_reaktors: PollingReaktorsTable
}

export interface UsersTable {
  id: Generated<string>
  username: string
  /** `scrypt$N$r$p$salt$hash` (base64 parts); never the password. */
  password_hash: string
  created_at: ColumnType<Date, Date | undefined, never>
}

export interface SessionsTable {
  id: Generated<string>
  user_id: string
  /** SHA-256 of the session token: a database dump never yields a usable token. */
  token_hash: Buffer
  created_at: ColumnType<Date, Date | undefined, never>
  expires_at: Date
  revoked_at: Date | null
}

/** The persisted state record of a polling reaktor (spec 2.2 plus DESIGN.md section 4 extras). */
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
}

export type User = Selectable<UsersTable>
export type PollingReaktorRow = Selectable<PollingReaktorsTable>
