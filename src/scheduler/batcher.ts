import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import type { SchedulerLogger } from './logger.js'
import { writeRunResults, type RunRecord } from './store.js'

/** Rows per statement of a flush. */
const MAX_ROWS = 1000
/** A row PostgreSQL refused this many times (data error, not an outage) is dropped, with an error log. */
const MAX_ROW_REJECTIONS = 3

/**
 * PostgreSQL refused the DATA (SQLSTATE class 22 "data exception", 23 "integrity constraint
 * violation"): retrying the same row will never help, and in one statement it takes the others
 * down with it. Everything else (connection lost, server shutting down, pool exhausted) is an
 * outage: every row is kept and retried.
 */
function isRejectedData (err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' && /^2[23][0-9A-Z]{3}$/.test(code)
}

/**
 * Run results are persisted in batches: the latest result of each reaktor is kept in memory and
 * flushed at most every `intervalMs` in ONE statement, so thousands of reaktors never mean
 * thousands of single-row writes per second. A crash loses at most the unflushed batch (last run
 * times), never a state change: start/stop are written directly, before they are acknowledged.
 */
export class RunResultBatcher {
  /** The latest result per reaktor. Runners reuse one record object each (no allocation per run). */
  private pending = new Map<string, RunRecord>()
  /** Per reaktor: times a statement holding only its row was refused for a data error (rare). */
  private readonly rejections = new Map<string, number>()
  private timer: NodeJS.Timeout | undefined
  private chain: Promise<void> = Promise.resolve()
  private closed = false
  /** Statements written and rows sent (for tests and metrics). */
  flushes = 0
  rowsFlushed = 0
  /** Results PostgreSQL kept refusing, dropped so that they no longer hold the others back. */
  rowsDropped = 0

  constructor (private readonly opts: { db: Kysely<Database>, owner: string, intervalMs: number, log: SchedulerLogger }) {}

  get size (): number {
    return this.pending.size
  }

  record (record: RunRecord): void {
    if (this.closed) return
    this.pending.set(record.reaktorId, record)
    if (this.rejections.size > 0) this.rejections.delete(record.reaktorId)
    this.arm(this.opts.intervalMs)
  }

  private arm (delay: number): void {
    if (this.timer !== undefined || this.closed) return
    this.timer = setTimeout(() => {
      this.timer = undefined
      this.flush().catch(() => {})
    }, delay)
  }

  /** Writes everything pending now; flushes never run concurrently. Rejects only on an outage. */
  async flush (): Promise<void> {
    const next = this.chain.then(async () => await this.flushOnce())
    this.chain = next.catch(() => {})
    await next
  }

  private async flushOnce (): Promise<void> {
    if (this.pending.size === 0) return
    const batch = [...this.pending.values()]
    this.pending.clear()
    // At most MAX_ROWS per statement: encoding a statement runs on the thread every timer shares.
    for (let i = 0; i < batch.length; i += MAX_ROWS) {
      try {
        await this.write(batch.slice(i, i + MAX_ROWS))
      } catch (err) {
        // An outage: keep what failed unless a newer result of the same reaktor arrived meanwhile.
        this.keep(batch.slice(i))
        this.opts.log.warn({ err, rows: batch.length - i }, 'could not persist polling run results; retrying')
        this.arm(Math.max(this.opts.intervalMs, 1000))
        throw err
      }
    }
  }

  /**
   * One statement for the batch. When PostgreSQL refuses a row (data error), the batch is split in
   * halves and each half written on its own, down to the refused rows: the others persist (a few
   * statements more, only when it happens), the refused ones are retried a few times, then dropped.
   */
  private async write (batch: RunRecord[]): Promise<void> {
    try {
      await writeRunResults(this.opts.db, this.opts.owner, batch)
      this.flushes++
      this.rowsFlushed += batch.length
      return
    } catch (err) {
      if (!isRejectedData(err)) throw err
      if (batch.length > 1) {
        const half = Math.ceil(batch.length / 2)
        await this.write(batch.slice(0, half))
        await this.write(batch.slice(half))
        return
      }
      const [refused] = batch
      const { reaktorId, runId } = refused
      const attempts = (this.rejections.get(reaktorId) ?? 0) + 1
      this.rejections.set(reaktorId, attempts)
      if (attempts >= MAX_ROW_REJECTIONS) {
        this.rejections.delete(reaktorId)
        this.rowsDropped++
        this.opts.log.error({ err, reaktorId, runId, attempts }, 'polling run result refused by the database; dropped (the next run writes a new one)')
      } else {
        this.keep([refused])
        this.opts.log.warn({ err, reaktorId, runId, attempts }, 'polling run result refused by the database; retrying it on its own')
        this.arm(Math.max(this.opts.intervalMs, 1000))
      }
    }
  }

  private keep (rows: RunRecord[]): void {
    for (const row of rows) if (!this.pending.has(row.reaktorId)) this.pending.set(row.reaktorId, row)
  }

  /** Final flush at shutdown; nothing is accepted afterwards. */
  async close (): Promise<void> {
    this.shut()
    await this.flush().catch(() => {})
  }

  /** Crash simulation: drops the unflushed batch. */
  discard (): void {
    this.shut()
    this.pending.clear()
  }

  private shut (): void {
    this.closed = true
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
  }
}
