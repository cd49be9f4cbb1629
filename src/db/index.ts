import pg from 'pg'
import { Kysely, PostgresDialect } from 'kysely'
import type { Database } from './schema.js'

export interface DatabaseHandle {
  pool: pg.Pool
  db: Kysely<Database>
  /** The connection string, for the dedicated (non-pooled) connections of the scheduler. */
  url: string
}

export function createDatabase (url: string, options: { max?: number, applicationName?: string } = {}): DatabaseHandle {
  const pool = new pg.Pool({
    connectionString: url,
    max: options.max ?? 10,
    application_name: options.applicationName ?? 'reaktor-service',
    // A dead database must not hang requests forever; /readyz answers 503 instead.
    connectionTimeoutMillis: 5000
  })
  // An idle client losing its connection (database restart) emits here; without a listener the
  // process would crash. The pool drops the client and opens a new one on the next query.
  pool.on('error', () => {})
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) })
  return { pool, db, url }
}
