import fp from 'fastify-plugin'
import type { FastifyRequest } from 'fastify'
import type { Kysely } from 'kysely'
import { insertAudit, logAudit, type AuditAction } from '../audit.js'
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
     * Records a privileged action: one structured log line and one row of the `audit` table.
     * With `db` (the transaction of the change) the row commits or rolls back with the change, and
     * a failed insert fails the change: nothing is half-applied. Without it the row is written on
     * its own and a failure is logged, never thrown: the action it reports has happened.
     */
    audit: (request: FastifyRequest, event: AuditEvent, db?: Kysely<Database>) => Promise<void>
  }
}

export default fp(async (fastify) => {
  const node = fastify.config.nodeId
  fastify.decorate('audit', async (request: FastifyRequest, event: AuditEvent, db?: Kysely<Database>) => {
    const row = {
      action: event.action,
      actor: event.actor !== undefined ? event.actor : request.auth?.username ?? null,
      address: request.ip ?? null,
      node,
      targets: [...event.targets],
      details: event.details ?? {}
    }
    if (db !== undefined) {
      await insertAudit(db, row)
    } else {
      await insertAudit(fastify.db, row).catch((err: unknown) => {
        request.log.error({ err, audit: row }, 'could not store the audit row; this log line keeps it')
      })
    }
    logAudit(request.log, { action: row.action, reaktors: row.targets, user: row.actor, node, details: { ...row.details, address: row.address } })
  })
}, { name: 'audit', dependencies: ['config', 'db'] })
