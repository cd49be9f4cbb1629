import { sql, type Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import type { SchedulerLogger } from './logger.js'
import type { HistoryRow } from './flush-store.js'

/** Reaktors per pruning statement (fewer after a statement ran into the pool's statement timeout). */
const CHUNK = 500
/** How often the pruner looks for reaktors due. */
const PRUNE_EVERY_MS = 1000

/**
 * Keeps at most `keep` history rows per reaktor (RUN_HISTORY_PER_REAKTOR), in the background: on
 * the pool, one statement at a time, never in the flush chain. A reaktor is pruned once this node
 * wrote `slack` rows of it since its last pruning (a tenth of `keep`, at least 1), and after the
 * first rows this node writes of it (another node, or an earlier process, wrote the ones before).
 * So a reaktor holds at most `keep + slack` rows, plus those written in the second or so before
 * its pruning statement runs. A first pass over every reaktor with history at start applies a
 * lowered `keep` to all, stopped ones and ones no longer registered included. `keep` 0 turns the
 * history off: nothing is written and nothing pruned. Deleting every stored run on each node's
 * start would make "off" irreversible, and one node so configured would wipe the history the other
 * nodes of its cluster still write and serve.
 */
export class HistoryPruner {
  readonly slack: number
  /** Rows written per reaktor since it was last pruned. */
  private readonly written_ = new Map<string, number>()
  private readonly due = new Set<string>()
  private timer: NodeJS.Timeout | undefined
  private work: Promise<void> = Promise.resolve()
  private stopped = false
  /** Where the first pass is (the last reaktor id it pruned), undefined once done. */
  private passAfter: string | undefined
  /** Reaktors per statement now: halved after a statement timed out (a lowered N can leave many rows), doubled back after each success. */
  private chunk = CHUNK
  /** Rows deleted (tests, measurements). */
  deleted = 0

  constructor (private readonly opts: { db: Kysely<Database>, keep: number, log: SchedulerLogger }) {
    this.slack = Math.max(1, Math.ceil(opts.keep / 10))
  }

  start (): void {
    if (this.stopped || this.passAfter !== undefined || this.opts.keep === 0) return
    this.passAfter = ''
    this.kick(0)
  }

  /** Rows just written: their reaktors become due once they gathered `slack` rows. */
  written (rows: readonly HistoryRow[]): void {
    for (const row of rows) {
      const n = (this.written_.get(row.reaktorId) ?? this.slack - 1) + 1
      this.written_.set(row.reaktorId, n)
      if (n >= this.slack) this.due.add(row.reaktorId)
    }
    if (this.due.size > 0) this.kick(PRUNE_EVERY_MS)
  }

  private kick (delay: number): void {
    if (this.timer !== undefined || this.stopped) return
    this.timer = setTimeout(() => {
      this.timer = undefined
      this.work = this.work.then(async () => await this.prune())
    }, delay)
  }

  private async prune (): Promise<void> {
    try {
      while (!this.stopped && this.passAfter !== undefined) {
        const ids = await this.nextIds(this.passAfter)
        if (ids.length === 0) { this.passAfter = undefined; break }
        await this.pruneIds(ids)
        this.passAfter = ids[ids.length - 1]
      }
      while (!this.stopped && this.due.size > 0) {
        const ids = [...this.due].slice(0, this.chunk)
        await this.pruneIds(ids)
        for (const id of ids) this.due.delete(id)
      }
    } catch (err) {
      if ((err as { code?: unknown }).code === '57014') this.chunk = Math.max(1, Math.floor(this.chunk / 2))
      this.opts.log.warn({ err, reaktorsPerStatement: this.chunk }, 'could not prune the run history; retrying')
      this.kick(PRUNE_EVERY_MS)
    }
  }

  /** Up to CHUNK reaktor ids with history, after `after` in order: a skip scan of the history index. */
  private async nextIds (after: string): Promise<string[]> {
    const { rows } = await sql<{ id: string }>`
      with recursive ids(id, n) as (
        (select reaktor_id, 1 from polling_runs where reaktor_id > ${after} order by reaktor_id limit 1)
        union all
        select (select reaktor_id from polling_runs where reaktor_id > ids.id order by reaktor_id limit 1), ids.n + 1
        from ids where ids.id is not null and ids.n < ${CHUNK}
      )
      select id from ids where id is not null
    `.execute(this.opts.db)
    return rows.map((r) => r.id)
  }

  /** Deletes every row older than the `keep` newest of each reaktor (newest by start, then by insertion). */
  private async pruneIds (all: readonly string[]): Promise<void> {
    for (let i = 0; i < all.length && !this.stopped;) {
      const ids = all.slice(i, i + this.chunk)
      await this.pruneChunk(ids)
      // Step by what was pruned, not by the chunk size doubled since (that skipped reaktors).
      i += ids.length
      this.chunk = Math.min(CHUNK, this.chunk * 2)
    }
  }

  private async pruneChunk (ids: readonly string[]): Promise<void> {
    for (const id of ids) this.written_.set(id, 0)
    const res = await sql`
      delete from polling_runs as r
      using (
        select v.id, c.started_at, c.seq
        from unnest(${[...ids]}::text[]) as v(id)
        cross join lateral (
          select started_at, seq from polling_runs
          where reaktor_id = v.id order by started_at desc, seq desc offset ${this.opts.keep} limit 1
        ) as c
      ) as c
      where r.reaktor_id = c.id and (r.started_at < c.started_at or (r.started_at = c.started_at and r.seq <= c.seq))
    `.execute(this.opts.db)
    this.deleted += Number(res.numAffectedRows ?? 0)
  }

  /** Stops; resolves once the statement in progress (if any) is done. */
  async stop (): Promise<void> {
    this.stopped = true
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
    await this.work
  }
}
