import { sql, type Kysely } from 'kysely'
import type { Database } from '../db/schema.js'

/** Rows per delete statement: short statements, short row locks, however much is due. */
const AUDIT_PRUNE_CHUNK = 5000
/** How often a node prunes (± a tenth, so that the nodes of a cluster drift apart). */
const AUDIT_PRUNE_EVERY_MS = 3_600_000

interface PrunerLogger {
  info: (obj: object, msg: string) => void
  warn: (obj: object, msg: string) => void
}

export interface AuditPrunerOptions {
  db: Kysely<Database>
  /** AUDIT_RETENTION; 0 keeps every row (the pruner does nothing). */
  retentionMs: number
  log: PrunerLogger
  chunk?: number
  everyMs?: number
}

/**
 * Deletes audit rows older than the retention: at start, then about hourly. Every node runs one;
 * that is safe, since a delete of what is already gone deletes nothing, and rows another node is
 * deleting are skipped rather than waited for. Each statement deletes at most `chunk` rows, the
 * oldest first by the `at` index, until a statement finds fewer. A failure is logged and the pass
 * is tried again at the next tick: pruning late is harmless, stopping the service for it is not.
 */
export class AuditPruner {
  private readonly chunk: number
  private readonly everyMs: number
  private timer: NodeJS.Timeout | undefined
  private work: Promise<void> = Promise.resolve()
  private stopped = false
  /** Rows deleted and statements run (tests, measurements). */
  deleted = 0
  statements = 0
  /** Passes finished, with or without an error (tests wait on them). */
  passes = 0

  constructor (private readonly opts: AuditPrunerOptions) {
    this.chunk = opts.chunk ?? AUDIT_PRUNE_CHUNK
    this.everyMs = opts.everyMs ?? AUDIT_PRUNE_EVERY_MS
  }

  start (): void {
    if (this.opts.retentionMs === 0) return
    this.schedule(0)
  }

  private schedule (delay: number): void {
    if (this.stopped) return
    this.timer = setTimeout(() => {
      this.timer = undefined
      this.work = this.prune().finally(() => {
        this.passes++
        this.schedule(this.everyMs * (0.9 + Math.random() * 0.2))
      })
    }, delay)
    // Never what keeps the process alive.
    this.timer.unref()
  }

  private async prune (): Promise<void> {
    let deleted = 0
    try {
      for (;;) {
        // `skip locked`: rows another node is deleting right now are its to delete.
        const res = await sql`
          delete from audit where id in (
            select id from audit where at < now() - ${`${this.opts.retentionMs} milliseconds`}::interval
            order by at limit ${this.chunk} for update skip locked
          )
        `.execute(this.opts.db)
        this.statements++
        const n = Number(res.numAffectedRows ?? 0)
        deleted += n
        this.deleted += n
        if (n < this.chunk || this.stopped) break
      }
      if (deleted > 0) this.opts.log.info({ deleted }, 'audit rows past AUDIT_RETENTION deleted')
    } catch (err) {
      this.opts.log.warn({ err, deleted }, 'could not prune the audit table; retrying at the next tick')
    }
  }

  /** Stops; resolves once the statement in progress (if any) is done. */
  async stop (): Promise<void> {
    this.stopped = true
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
    await this.work
  }
}
