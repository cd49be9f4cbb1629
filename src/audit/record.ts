/**
 * Audit: every privileged action (polling control, the restart-time reset, logins and logouts,
 * user and token management) is one row of the `audit` table (read back by `GET /api/v1/audit`)
 * and ONE structured log line with an `audit` object, so a log pipeline can select them with
 * `audit.action` and answer "who changed what, where, when" without parsing messages.
 * Fastify-free on purpose: the scheduler records the restart-time reset itself.
 */

import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'

export type AuditAction =
  | 'polling.start' | 'polling.stop' | 'polling.run' | 'polling.bulk_start' | 'polling.bulk_stop' | 'polling.restart_reset'
  | 'auth.login' | 'auth.login_failed' | 'auth.logout' | 'auth.password_change'
  | 'user.create' | 'user.role_change' | 'user.password_reset' | 'user.disable' | 'user.enable' | 'user.delete'
  | 'token.create' | 'token.revoke'
  | 'app.publish' | 'app.activate' | 'app.delete_version' | 'app.delete' | 'polling.unregistered'

/** One row of the `audit` table, as written. */
export interface AuditRow {
  action: AuditAction
  /** Username of who acted; null for the service itself. */
  actor: string | null
  /** Client address of the request; null for the service itself. */
  address: string | null
  /** NODE_ID of the node that took the request (or applied the rule). */
  node: string
  /** What was acted on: reaktor ids (for bulk actions, those that exist), a username, a token id. */
  targets: string[]
  /** What the action changed or found, per action (e.g. `changed: false` for an idempotent repeat). */
  details: Record<string, unknown>
}

/** Stores one audit row: the audit plugin's writer, also handed to the scheduler. */
export type AuditWriter = (row: AuditRow) => Promise<void>

/** Inserts one audit row (in the caller's transaction when `db` is one). */
export async function insertAudit (db: Kysely<Database>, row: AuditRow): Promise<void> {
  await db.insertInto('audit').values({ ...row, details: JSON.stringify(row.details) }).execute()
}

interface AuditLogger {
  info: (obj: object, msg: string) => void
  error: (obj: object, msg: string) => void
}

/**
 * Writes the one audit line of an action. `notStored`: why its row could not be written; the line
 * is then an error carrying the reason, and the only record of the action. Never throws: a logger
 * failure must not undo or fail the action it reports.
 */
export function logAudit (log: AuditLogger, row: AuditRow, notStored?: unknown): void {
  const audit = { action: row.action, targets: [...row.targets], user: row.actor, address: row.address, node: row.node, details: row.details }
  try {
    if (notStored === undefined) log.info({ audit }, `audit: ${row.action}`)
    else log.error({ audit, err: notStored }, `audit: ${row.action} (not stored in the audit table: this line is its record)`)
  } catch {
    // Nothing left to report it with.
  }
}

/**
 * Records an action that has already happened: its row through `write`, then its one log line.
 * A failed write is logged with the entry, never thrown: the action stands, it is not undone.
 */
export async function recordAudit (log: AuditLogger, write: AuditWriter | undefined, row: AuditRow): Promise<void> {
  let notStored: unknown
  if (write !== undefined) {
    try {
      await write(row)
    } catch (err) {
      notStored = err
    }
  }
  logAudit(log, row, notStored)
}
