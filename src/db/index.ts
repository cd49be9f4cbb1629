import pg from 'pg'
import { Kysely, PostgresDialect } from 'kysely'
import type { Database } from './schema.js'

export interface DatabaseHandle {
  pool: pg.Pool
  db: Kysely<Database>
  /** The connection string, for the dedicated (non-pooled) connections of the scheduler. */
  url: string
}

/**
 * The bounds of every statement on the service's pool. A live but slow server cancels a statement
 * after STATEMENT_TIMEOUT_MS (SQLSTATE 57014, the connection stays usable); a server that answers
 * nothing at all (frozen, or the network silently dropping packets) is given up by the client
 * QUERY_GRACE_MS later, and that connection is discarded. A new connection is given up after
 * CONNECT_TIMEOUT_MS, and so is the wait for a free one. So a request waits for the database at
 * most about 6 s per statement, then answers 503 (src/db/unavailable.ts).
 */
export const STATEMENT_TIMEOUT_MS = 5000
export const QUERY_GRACE_MS = 1000
export const CONNECT_TIMEOUT_MS = 5000

export interface DatabaseOptions {
  max?: number
  applicationName?: string
  /** Bounds statements as above; false for none (migrations: one may wait for another node's). */
  bounded?: boolean
}

export function createDatabase (url: string, options: DatabaseOptions = {}): DatabaseHandle {
  const bounded = options.bounded ?? true
  const pool = new pg.Pool({
    connectionString: url,
    max: options.max ?? 10,
    application_name: options.applicationName ?? 'reaktor-service',
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    ...(bounded ? { statement_timeout: STATEMENT_TIMEOUT_MS, query_timeout: STATEMENT_TIMEOUT_MS + QUERY_GRACE_MS, Client: DiscardOnTimeout } : {})
  })
  survivesLostConnections(pool)
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) })
  return { pool, db, url }
}

/**
 * A client whose statement timed out on the client side is still waiting for that answer: every
 * later statement would queue behind it, forever if the answer never comes (a half-open socket).
 * Ending it (pg destroys the socket of a client with a statement in flight) makes the pool drop it
 * on release and open a fresh one; a transaction on it fails at once instead of waiting again for
 * its ROLLBACK.
 */
class DiscardOnTimeout extends pg.Client {
  override query (...args: unknown[]): any {
    const result = (super.query as (...a: unknown[]) => unknown)(...args)
    if (result instanceof Promise) result.catch((err: unknown) => endOnReadTimeout(this, err))
    return result
  }
}

/** Ends a client whose statement went unanswered past its `query_timeout` (see above). */
export function endOnReadTimeout (client: pg.Client, err: unknown): void {
  if ((err as Error | null)?.message === 'Query read timeout') client.end().catch(() => {})
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
