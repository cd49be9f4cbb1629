import { sql, type Kysely } from 'kysely'
import type { Database, RunOutcomeName } from '../db/schema.js'
import type { RegisteredPollingReaktor } from '../apps/types.js'
import { UnknownReaktorError } from '../scheduler/index.js'
import type { PollingRunType } from '../schemas/polling-runs.js'
import { parseTimestamp, TIMESTAMP_FORM, type HistoryCursors, type HistoryPosition } from './history-cursor.js'

export interface RunPage {
  runs: PollingRunType[]
  /** The cursor of the next (older) page; null when no older run was there at the time of the read. */
  nextBefore: string | null
}

interface RunRow {
  run_id: string
  reaktor_id: string
  node: string
  started_at: Date
  started_us: string
  seq: string
  duration_ms: number | null
  outcome: RunOutcomeName
  error: string | null
}

const EMPTY: RunPage = { runs: [], nextBefore: null }

/**
 * The run history of the registered reaktors, as `GET /polling/{id}/runs` pages it. With history
 * turned off (RUN_HISTORY_PER_REAKTOR=0) nothing is written and nothing is pruned either: the rows
 * of a time it was on are not shown, so that the answer is the same empty one on every node.
 */
export class RunHistory {
  constructor (
    private readonly db: Kysely<Database>,
    private readonly cursors: HistoryCursors,
    private readonly reaktors: ReadonlyMap<string, RegisteredPollingReaktor>,
    private readonly enabled: boolean
  ) {}

  /**
   * The page of `limit` runs before `before` (a cursor of this reaktor or a timestamp), or why
   * `before` names no position. An id that is not registered here is an UnknownReaktorError (404),
   * as for status.
   */
  async page (reaktorId: string, limit: number, before?: string): Promise<RunPage | { invalid: string }> {
    if (!this.reaktors.has(reaktorId)) throw new UnknownReaktorError(reaktorId)
    const position = before === undefined ? undefined : this.position(reaktorId, before)
    if (position !== undefined && 'invalid' in position) return position
    if (!this.enabled) return EMPTY
    return await this.read(reaktorId, limit, position)
  }

  private position (reaktorId: string, before: string): HistoryPosition | { invalid: string } {
    const timestamp = parseTimestamp(before)
    if (timestamp !== undefined) return 'invalid' in timestamp ? { invalid: `before: ${timestamp.invalid}` } : timestamp
    const position = this.cursors.decode(reaktorId, before)
    if (position !== undefined) return position
    const what = before.length === this.cursors.length ? `not a cursor issued for reaktor "${reaktorId}"` : 'neither a cursor nor a timestamp'
    return { invalid: `before is ${what}: pass the nextBefore of a previous page of this reaktor, or ${TIMESTAMP_FORM}` }
  }

  /**
   * A page of a reaktor's run history, newest first: started_at descending, then seq descending,
   * which is the order of the table's index, and `limit` runs from there. Keyset paging, not an
   * offset: the next page starts after the last run's (started_at, seq), whatever was appended or
   * pruned in between, so no run is shown twice or skipped; the position is compared, never looked
   * up, so a page still follows when the run it ended on has been pruned meanwhile. One statement,
   * one snapshot: one more row than asked for tells whether an older page exists. The read is the
   * database's, the same from every node.
   */
  private async read (reaktorId: string, limit: number, before?: HistoryPosition): Promise<RunPage> {
    // A microsecond count as a timestamp, exactly: float8 holds every integer below 2^53 (the year 2255).
    const after = before === undefined
      ? sql``
      : sql`and (r.started_at, r.seq) < (timestamptz 'epoch' + ${before.startedUs.toString()}::bigint * interval '1 microsecond', ${before.seq.toString()}::bigint)`
    const { rows } = await sql<RunRow>`
      select r.run_id, r.reaktor_id, r.node, r.started_at, (extract(epoch from r.started_at) * 1000000)::bigint as started_us,
             r.seq, r.duration_ms, r.outcome, r.error
      from polling_runs as r
      where r.reaktor_id = ${reaktorId} ${after}
      order by r.started_at desc, r.seq desc
      limit ${limit + 1}
    `.execute(this.db)
    const page = rows.slice(0, limit)
    const last = page.at(-1)
    return {
      runs: page.map((r) => ({
        runId: r.run_id,
        reaktorDefinitionId: r.reaktor_id,
        node: r.node,
        startedAt: r.started_at.toISOString(),
        durationMs: r.duration_ms,
        outcome: r.outcome,
        error: r.error
      })),
      nextBefore: rows.length > limit && last !== undefined
        ? this.cursors.encode(reaktorId, { startedUs: BigInt(last.started_us), seq: BigInt(last.seq) })
        : null
    }
  }
}
