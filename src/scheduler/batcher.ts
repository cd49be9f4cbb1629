import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import type { SchedulerLogger } from './logger.js'
import { writeRunResults, type RunRecord } from './store.js'

/**
 * Run results are persisted in batches: the latest result of each reaktor is kept in memory and
 * flushed at most every `intervalMs` in ONE statement, so thousands of reaktors never mean
 * thousands of single-row writes per second. A crash loses at most the unflushed batch (last run
 * times), never a state change: start/stop are written directly, before they are acknowledged.
 */
export class RunResultBatcher {
  private pending = new Map<string, RunRecord>()
  private timer: NodeJS.Timeout | undefined
  private chain: Promise<void> = Promise.resolve()
  private closed = false
  /** Statements written and rows sent (for tests and metrics). */
  flushes = 0
  rowsFlushed = 0

  constructor (private readonly opts: { db: Kysely<Database>, intervalMs: number, log: SchedulerLogger }) {}

  get size (): number {
    return this.pending.size
  }

  record (record: RunRecord): void {
    if (this.closed) return
    this.pending.set(record.reaktorId, record)
    this.arm(this.opts.intervalMs)
  }

  private arm (delay: number): void {
    if (this.timer !== undefined || this.closed) return
    this.timer = setTimeout(() => {
      this.timer = undefined
      this.flush().catch(() => {})
    }, delay)
  }

  /** Writes everything pending now; flushes never run concurrently. */
  async flush (): Promise<void> {
    const next = this.chain.then(async () => await this.flushOnce())
    this.chain = next.catch(() => {})
    await next
  }

  private async flushOnce (): Promise<void> {
    if (this.pending.size === 0) return
    const batch = [...this.pending.values()]
    this.pending.clear()
    try {
      await writeRunResults(this.opts.db, batch)
      this.flushes++
      this.rowsFlushed += batch.length
    } catch (err) {
      // Keep what failed unless a newer result of the same reaktor arrived meanwhile; retry later.
      for (const record of batch) if (!this.pending.has(record.reaktorId)) this.pending.set(record.reaktorId, record)
      this.opts.log.warn({ err, rows: batch.length }, 'could not persist polling run results; retrying')
      this.arm(Math.max(this.opts.intervalMs, 1000))
      throw err
    }
  }

  /** Final flush at shutdown; nothing is accepted afterwards. */
  async close (): Promise<void> {
    this.closed = true
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
    await this.flush().catch(() => {})
  }

  /** Crash simulation: drops the unflushed batch. */
  discard (): void {
    this.closed = true
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
    this.pending.clear()
  }
}
