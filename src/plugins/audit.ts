import fp from 'fastify-plugin'
import type { FastifyRequest } from 'fastify'
import type { Kysely } from 'kysely'
import { insertAudit, logAudit, recordAudit, type AuditAction, type AuditRow, type AuditWriter } from '../audit/record.js'
import { AuditPruner } from '../audit/pruner.js'
import type { Database } from '../db/schema.js'

/** What a route says about a privileged action; who, where and which node come from the request. */
export interface AuditEvent {
  action: AuditAction
  /** What was acted on: reaktor ids, a username, a token id. */
  targets: readonly string[]
  details?: Record<string, unknown>
  /** Who acted, when not the request's authenticated user (a login names the account it tried). */
  actor?: string | null
}

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * Records a privileged action: one row of the `audit` table and one structured log line.
     * With `db` (the transaction of the change) the row commits or rolls back with the change, and
     * a failed insert fails the change: nothing is half-applied. Without it (an action that has
     * already happened, such as a polling start) the row is written on its own; a failed insert is
     * not thrown but logged with the entry (the action is not undone).
     */
    audit: (request: FastifyRequest, event: AuditEvent, db?: Kysely<Database>) => Promise<void>
    /** The writer of rows recorded outside a request (the scheduler's restart-time reset). */
    auditWriter: AuditWriter
  }
}

/**
 * The audit table: how rows are recorded, and the pruner that deletes those past AUDIT_RETENTION
 * (started when the app is ready, stopped at close).
 */
export default fp(async (fastify) => {
  const node = fastify.config.nodeId
  const write: AuditWriter = async (row) => { await insertAudit(fastify.db, row) }
  // Writes not awaited by their caller (a failed login answers without waiting): awaited at close,
  // before the pool they use is destroyed.
  const pending = new Set<Promise<void>>()

  fastify.decorate('auditWriter', write)
  fastify.decorate('audit', async (request: FastifyRequest, event: AuditEvent, db?: Kysely<Database>) => {
    const row: AuditRow = {
      action: event.action,
      actor: event.actor !== undefined ? event.actor : request.auth?.username ?? null,
      address: request.ip ?? null,
      node,
      targets: [...event.targets],
      details: event.details ?? {}
    }
    if (db !== undefined) {
      await insertAudit(db, row)
      logAudit(request.log, row)
      return
    }
    const recorded = recordAudit(request.log, write, row)
    pending.add(recorded)
    try {
      await recorded
    } finally {
      pending.delete(recorded)
    }
  })

  const pruner = new AuditPruner({ db: fastify.db, retentionMs: fastify.config.auditRetentionMs, log: fastify.log.child({ component: 'audit-pruner' }) })
  fastify.addHook('onReady', async () => { pruner.start() })
  // onClose hooks run in reverse order of registration: this one before the db plugin's.
  fastify.addHook('onClose', async () => {
    await pruner.stop()
    await Promise.all([...pending])
  })
}, { name: 'audit', dependencies: ['config', 'db'] })
