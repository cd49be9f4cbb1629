/**
 * Audit lines: every privileged state change (start, stop, run now, bulk actions, the restart-time
 * reset) is logged as ONE structured line with an `audit` object, so a log pipeline can select them
 * with `audit.action` and answer "who changed what, where, when" without parsing messages.
 * Fastify-free on purpose: the scheduler writes the restart-time reset's line itself.
 */

import type { Kysely } from 'kysely'
import type { Database } from './db/schema.js'

export type AuditAction =
  | 'polling.start' | 'polling.stop' | 'polling.run' | 'polling.bulk_start' | 'polling.bulk_stop' | 'polling.restart_reset'
  | 'auth.login' | 'auth.login_failed' | 'auth.logout' | 'auth.password_change'
  | 'user.create' | 'user.role_change' | 'user.password_reset' | 'user.disable' | 'user.enable' | 'user.delete'
  | 'token.create' | 'token.revoke'

/** One row of the `audit` table, as written. */
export interface AuditRow {
  action: AuditAction
  actor: string | null
  address: string | null
  node: string
  targets: string[]
  details: Record<string, unknown>
}

/** Inserts one audit row (in the caller's transaction when `db` is one). */
export async function insertAudit (db: Kysely<Database>, row: AuditRow): Promise<void> {
  await db.insertInto('audit').values({ ...row, details: JSON.stringify(row.details) }).execute()
}

export interface AuditEntry {
  action: AuditAction
  /** The reaktors acted on (for bulk actions: those that exist; unknown ids go in `details`). */
  reaktors: readonly string[]
  /** Who asked: the username of the session or token; null for the service itself (restart rules). */
  user: string | null
  /** NODE_ID of the node that took the request (or applied the rule). */
  node: string
  /** What the action changed or found, per action (e.g. `changed: false` for an idempotent repeat). */
  details?: Record<string, unknown>
}

interface InfoLogger { info: (obj: object, msg: string) => void }

/** Writes one audit line. Never throws: a logger failure must not undo or fail the action it reports. */
export function logAudit (log: InfoLogger, entry: AuditEntry): void {
  try {
    log.info({ audit: { ...entry, reaktors: [...entry.reaktors] } }, `audit: ${entry.action}`)
  } catch {
    // Nothing left to report it with.
  }
}

/** What an API request's audit line is read from: its logger and who it authenticated as. */
interface AuditedRequest { log: InfoLogger, auth: { username: string } | null }

/** Writes the audit line of an API request: its user, and `node`, the node that took it. */
export function logRequestAudit (request: AuditedRequest, node: string, { action, reaktors, details }: Omit<AuditEntry, 'user' | 'node'>): void {
  logAudit(request.log, { action, reaktors, user: request.auth?.username ?? null, node, details })
}
