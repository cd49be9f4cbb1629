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
  survivesLostConnections(pool)
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) })
  return { pool, db, url }
}

/**
 * Without these listeners a lost connection (database restart, terminated backend) crashes the
 * process. An idle client emits on the pool, which drops it and opens a new one on the next query.
 * pg-pool watches only idle clients: a lent one (a transaction between two statements) emits on
 * itself; the statement in flight or the next one fails instead, and the pool drops it on release.
 */
export function survivesLostConnections (pool: pg.Pool): void {
  pool.on('error', () => {})
  pool.on('connect', (client) => client.on('error', () => {}))
}
