import { sql, type Kysely } from 'kysely'
import { Counter, Gauge, type Registry } from 'prom-client'
import type { Database } from '../db/schema.js'

/**
 * How long a scrape waits for the per-reaktor state: well within Prometheus's default scrape
 * timeout (10 s) and within the 1 to 2 s probes commonly get, even from a frozen database (the
 * pool's own bound is 6 s, src/db/index.ts).
 */
export const STATE_READ_TIMEOUT_MS = 1500

interface StateRow {
  reaktorId: string
  running: boolean
  consecutiveFailures: number
  /** Epoch seconds; 0 when it never succeeded. */
  lastSuccessSeconds: number
}

export interface ReaktorStateSource {
  db: Kysely<Database>
  /** Partitions whose lock this node holds now. */
  heldPartitions: () => readonly number[]
  /** The partition of an id this node registers (undefined for any other id). */
  partitionOf: (reaktorId: string) => number | undefined
  timeoutMs?: number
}

/**
 * The per-reaktor gauges `reaktor_polling_last_success_timestamp_seconds`,
 * `reaktor_polling_consecutive_failures` and `reaktor_polling_running`, read from the persisted
 * rows at scrape time, for the reaktors of the partitions this node holds. Each partition is held
 * by one node, so a scrape of every node has each registered reaktor once; and the values are the
 * stored ones, so they carry on unchanged when a partition moves to another node.
 *
 * The three gauges of one scrape share one read (prom-client asks every metric at once). A read
 * that fails or outlasts STATE_READ_TIMEOUT_MS leaves the values of the last read in place, and
 * a read still out is joined rather than doubled: a database that answers nothing ties up at most
 * one pool connection for the metrics, however often they are scraped.
 */
export class ReaktorStateMetrics {
  /** The last rows read, by partition. */
  private rows = new Map<number, StateRow[]>()
  private reading: Promise<void> | undefined
  private scrape: Promise<StateRow[]> | undefined
  /** Scrapes that showed the values of an earlier read. */
  private readFailures = 0

  constructor (private readonly source: ReaktorStateSource) {}

  register (registry: Registry): void {
    const current = async (): Promise<StateRow[]> => await this.current()
    const readFailures = (): number => this.readFailures
    const gauge = (name: string, help: string, value: (row: StateRow) => number): void => {
      void new Gauge({
        name,
        help,
        labelNames: ['reaktor'],
        registers: [registry],
        aggregator: 'max',
        async collect () {
          const rows = await current()
          this.reset()
          for (const row of rows) this.set({ reaktor: row.reaktorId }, value(row))
        }
      })
    }
    gauge('reaktor_polling_last_success_timestamp_seconds', 'Start of the last successful run of the polling reaktor (epoch seconds; 0: never), exported by the node holding its partition',
      (r) => r.lastSuccessSeconds)
    gauge('reaktor_polling_consecutive_failures', 'Failed runs of the polling reaktor since its last success, exported by the node holding its partition',
      (r) => r.consecutiveFailures)
    gauge('reaktor_polling_running', '1 while the polling reaktor is started (state running), 0 while stopped, exported by the node holding its partition',
      (r) => r.running ? 1 : 0)
    void new Counter({
      name: 'reaktor_polling_state_read_failures_total',
      help: `Scrapes whose read of the per-reaktor state failed or took longer than ${STATE_READ_TIMEOUT_MS} ms (they showed the values read before)`,
      registers: [registry],
      // After this scrape's read: its own failure is counted in the same scrape.
      async collect () {
        await current()
        this.reset()
        this.inc(readFailures())
      }
    })
  }

  /** The rows of the reaktors this node exports now (one read per scrape, shared by its metrics). */
  private async current (): Promise<StateRow[]> {
    this.scrape ??= this.collect().finally(() => { this.scrape = undefined })
    return await this.scrape
  }

  private async collect (): Promise<StateRow[]> {
    const held = this.source.heldPartitions()
    if (held.length === 0) return []
    this.reading ??= this.read(held).finally(() => { this.reading = undefined })
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<false>((resolve) => { timer = setTimeout(() => resolve(false), this.source.timeoutMs ?? STATE_READ_TIMEOUT_MS) })
    const answered = await Promise.race([this.reading.then(() => true, () => false), late])
    clearTimeout(timer)
    if (!answered) this.readFailures++
    // Only partitions still held: one handed over meanwhile is exported by its new holder.
    const out: StateRow[] = []
    for (const p of this.source.heldPartitions()) {
      for (const row of this.rows.get(p) ?? []) out.push(row)
    }
    return out
  }

  private async read (partitions: readonly number[]): Promise<void> {
    const { rows } = await sql<{ reaktor_id: string, state: string, consecutive_failures: number, last_success_at: Date | null }>`
      select reaktor_id, state, consecutive_failures, last_success_at from polling_reaktors
      where partition = any(${[...partitions]}::int[])
    `.execute(this.source.db)
    const byPartition = new Map<number, StateRow[]>(partitions.map((p) => [p, []]))
    for (const r of rows) {
      // Rows of ids no longer registered stay in the table; they are not exported.
      const p = this.source.partitionOf(r.reaktor_id)
      const list = p === undefined ? undefined : byPartition.get(p)
      list?.push({
        reaktorId: r.reaktor_id,
        running: r.state === 'running',
        consecutiveFailures: r.consecutive_failures,
        lastSuccessSeconds: r.last_success_at === null ? 0 : r.last_success_at.getTime() / 1000
      })
    }
    this.rows = byPartition
  }
}
