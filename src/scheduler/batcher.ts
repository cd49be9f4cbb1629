import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import { writeRunResults, type FlushBatch, type HistoryRow } from './flush-store.js'
import { HistoryPruner } from './history-pruner.js'
import type { SchedulerLogger } from './logger.js'
import { RunningMarks } from './running-marks.js'
import type { RunRecord } from './reaktor-store.js'

/** Rows per statement of a flush (results and marks; history rows likewise, on top). */
const MAX_ROWS = 1000
/** A row PostgreSQL refused this many times (data error, not an outage) is dropped, with an error log. */
const MAX_ROW_REJECTIONS = 3
/**
 * History rows kept while the database is away: 100,000 rows of at most ~2 kB (a bounded error
 * text) each. At the limit the oldest tenth is dropped at once (dropping one per new row would
 * move the whole list on every run).
 */
export const MAX_PENDING_HISTORY = 100_000

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

/** The first `n` rows of a batch (results first, then marks, then history) and the rest. */
function split (batch: FlushBatch, n: number): [FlushBatch, FlushBatch] {
  const r = Math.min(n, batch.results.length)
  const m = Math.min(n - r, batch.marks.length)
  const h = n - r - m
  return [
    { results: batch.results.slice(0, r), since: batch.since.slice(0, r), marks: batch.marks.slice(0, m), history: batch.history.slice(0, h) },
    { results: batch.results.slice(r), since: batch.since.slice(r), marks: batch.marks.slice(m), history: batch.history.slice(h) }
  ]
}

/**
 * A record replaces an unflushed one of another runner of the same reaktor (a stopped runner's
 * timed-out run settled, then the new runner's run ended): the last success and failure (with its
 * message) it has not seen itself are carried over, else they would never be written.
 */
function inheritLastRuns (record: RunRecord, earlier: RunRecord): void {
  if (earlier.failureAt !== null && (record.failureAt === null || earlier.failureAt > record.failureAt)) {
    record.failureAt = earlier.failureAt
    record.lastError = earlier.lastError
  }
  if (earlier.successAt !== null && (record.successAt === null || earlier.successAt > record.successAt)) record.successAt = earlier.successAt
}

function rowsOf (batch: FlushBatch): number {
  return batch.results.length + batch.marks.length + batch.history.length
}

/**
 * Run results are persisted in batches: the latest result of each reaktor is kept in memory and
 * flushed at most every `intervalMs` in ONE statement, so thousands of reaktors never mean
 * thousands of single-row writes per second. The same statement appends the run history (one row
 * per run, none when `historyPerReaktor` is 0) and writes `running_since` of the runs in flight at
 * the flush. A crash loses at most the unflushed batch (last run times and their history), never
 * a state change: start/stop are written directly, before they are acknowledged.
 */
export class RunResultBatcher {
  /** The latest result per reaktor. Runners reuse one record object each (no allocation per run). */
  private pending = new Map<string, RunRecord>()
  /** Every run since the last flush, oldest first. */
  private history: HistoryRow[] = []
  private readonly marks = new RunningMarks()
  /** Per reaktor: times a statement holding only its row was refused for a data error (rare). */
  private readonly rejections = new Map<string, number>()
  private readonly pruner: HistoryPruner
  /** RUN_HISTORY_PER_REAKTOR above 0: runs are appended to the history. */
  private readonly keepHistory: boolean
  private timer: NodeJS.Timeout | undefined
  private chain: Promise<void> = Promise.resolve()
  private closed = false
  /** The current outage already logged its first dropped history rows. */
  private dropLogged = false
  /**
   * The pending history may name a run twice: it holds a timed-out run's row written at its
   * timeout (no duration yet), or rows put back by a failed flush. Without one, a flush skips the fold.
   */
  private historyMayRepeat = false
  /** Statements written and rows sent (for tests and metrics). */
  flushes = 0
  rowsFlushed = 0
  /** Results PostgreSQL kept refusing, dropped so that they no longer hold the others back. */
  rowsDropped = 0
  /** History rows written, and those lost: dropped beyond MAX_PENDING_HISTORY, or refused. */
  historyFlushed = 0
  historyDropped = 0

  constructor (private readonly opts: { db: Kysely<Database>, owner: string, intervalMs: number, log: SchedulerLogger, historyPerReaktor?: number }) {
    this.keepHistory = (opts.historyPerReaktor ?? 0) > 0
    this.pruner = new HistoryPruner({ db: opts.db, keep: opts.historyPerReaktor ?? 0, log: opts.log })
  }

  get size (): number {
    return this.pending.size
  }

  /** History rows waiting for a flush. */
  get historySize (): number {
    return this.history.length
  }

  /** Starts the background pruning of the history (a first pass over every reaktor at once). */
  startPruning (): void {
    this.pruner.start()
  }

  /** A result (a run ended, or timed out, or a timed-out run settled): the latest of its reaktor, one history row. */
  record (record: RunRecord): void {
    if (this.closed) return
    const earlier = this.pending.get(record.reaktorId)
    if (earlier !== undefined && earlier !== record) inheritLastRuns(record, earlier)
    this.pending.set(record.reaktorId, record)
    if (this.rejections.size > 0) this.rejections.delete(record.reaktorId)
    if (record.durationMs !== null) this.marks.ended(record.reaktorId, record.runId)
    if (this.keepHistory) this.append({ runId: record.runId, reaktorId: record.reaktorId, startedAt: record.lastRun, durationMs: record.durationMs, outcome: record.outcome, error: record.outcome === 'more_work' || record.outcome === 'no_work' ? null : record.lastError })
    this.arm(this.opts.intervalMs)
  }

  /** A run starts: its `running_since` is written if it is still in flight at a flush. */
  runStarted (reaktorId: string, runId: string, startedAt: number, partition: number, generation: string): void {
    if (this.closed) return
    this.marks.started(reaktorId, runId, startedAt, partition, generation)
    this.arm(this.opts.intervalMs)
  }

  /** A run ended by a halt (stop, shutdown, fencing, release): a history row only, and its running_since cleared. */
  runAborted (reaktorId: string, runId: string, startedAt: number, durationMs: number, error: string): void {
    if (this.closed) return
    this.marks.aborted(reaktorId, runId, startedAt)
    if (this.keepHistory) this.append({ runId, reaktorId, startedAt, durationMs, outcome: 'aborted', error })
    this.arm(this.opts.intervalMs)
  }

  /** Called only when history is kept: with it off, a run allocates no row at all. */
  private append (row: HistoryRow): void {
    if (this.history.length >= MAX_PENDING_HISTORY) this.dropOldest(MAX_PENDING_HISTORY / 10)
    if (row.durationMs === null) this.historyMayRepeat = true
    this.history.push(row)
  }

  private dropOldest (n: number): void {
    this.history.splice(0, n)
    this.historyDropped += n
    if (this.dropLogged) return
    this.dropLogged = true
    this.opts.log.error({ dropped: n, kept: this.history.length }, `run history not persisted for too long: the oldest rows beyond ${MAX_PENDING_HISTORY} are dropped (counted in historyDropped; logged once per outage)`)
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
    if (this.pending.size === 0 && this.history.length === 0 && !this.marks.due) return
    const results = [...this.pending.values()]
    this.pending.clear()
    const history = this.takeHistory()
    const { since, marks, undo } = this.marks.take(results)
    // At most MAX_ROWS per statement: encoding a statement runs on the thread every timer shares.
    const chunks = Math.max(Math.ceil(results.length / MAX_ROWS), Math.ceil(marks.length / MAX_ROWS), Math.ceil(history.length / MAX_ROWS))
    for (let i = 0; i < chunks; i++) {
      const from = i * MAX_ROWS
      const to = from + MAX_ROWS
      try {
        await this.write({ results: results.slice(from, to), since: since.slice(from, to), marks: marks.slice(from, to), history: history.slice(from, to) })
      } catch (err) {
        // An outage: keep what failed unless a newer result of the same reaktor arrived meanwhile.
        this.keep(results.slice(from))
        this.history = history.slice(from).concat(this.history)
        this.historyMayRepeat = true
        if (this.history.length > MAX_PENDING_HISTORY) this.dropOldest(this.history.length - MAX_PENDING_HISTORY)
        undo(from)
        this.opts.log.warn({ err, rows: results.length - from, historyRows: history.length - from }, 'could not persist polling run results; retrying')
        this.arm(Math.max(this.opts.intervalMs, 1000))
        throw err
      }
    }
    this.dropLogged = false
  }

  /** The pending history, a timed-out run's two rows (at its timeout, at its settling) folded into the latter. */
  private takeHistory (): HistoryRow[] {
    const rows = this.history
    this.history = []
    if (!this.historyMayRepeat) return rows
    this.historyMayRepeat = false
    const byRun = new Map<string, HistoryRow>()
    for (const row of rows) byRun.set(row.runId, row)
    return byRun.size === rows.length ? rows : [...byRun.values()]
  }

  /**
   * One statement for the batch. When PostgreSQL refuses a row (data error), the batch is split in
   * halves and each half written on its own, down to the refused rows: the others persist (a few
   * statements more, only when it happens), a refused result is retried a few times, then dropped;
   * a refused history row or mark is dropped at once (the same row is refused again).
   */
  private async write (batch: FlushBatch): Promise<void> {
    try {
      await writeRunResults(this.opts.db, this.opts.owner, batch)
      this.flushes++
      this.rowsFlushed += batch.results.length
      this.historyFlushed += batch.history.length
      if (batch.history.length > 0) this.pruner.written(batch.history)
      return
    } catch (err) {
      if (!isRejectedData(err)) throw err
      const rows = rowsOf(batch)
      if (rows > 1) {
        const [first, second] = split(batch, Math.ceil(rows / 2))
        await this.write(first)
        await this.write(second)
        return
      }
      if (batch.results.length === 0) {
        const refused = batch.history[0] ?? batch.marks[0]
        if (batch.history.length > 0) this.historyDropped++
        this.opts.log.error({ err, reaktorId: refused.reaktorId, runId: (refused as HistoryRow).runId }, batch.history.length > 0
          ? 'polling run history row refused by the database; dropped'
          : 'polling running mark refused by the database; dropped')
        return
      }
      const [refused] = batch.results
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
    await this.pruner.stop()
  }

  /** Crash simulation: drops the unflushed batch. */
  discard (): void {
    this.shut()
    this.pending.clear()
    this.history = []
    this.historyMayRepeat = false
    void this.pruner.stop()
  }

  private shut (): void {
    this.closed = true
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
  }
}
