import { sql, type Kysely } from 'kysely'
import type { Database, RunOutcomeName } from '../db/schema.js'
import { keepRequestedRun } from './run-now.js'
import { isoTime, numberArray, textArray, type RunRecord } from './reaktor-store.js'

/** The batched write of run results, run history and running marks (one statement per flush). */

/** One run for `polling_runs` (the node is the writer's). */
export interface HistoryRow {
  runId: string
  reaktorId: string
  startedAt: number
  durationMs: number | null
  outcome: RunOutcomeName
  error: string | null
}

/**
 * `running_since` of a reaktor without a result in the same flush: `since` set (a run in flight,
 * written only under its partition's generation), or null to clear it up to `clearBefore` (the
 * start of an aborted run whose running_since was written).
 */
export interface RunningMark {
  reaktorId: string
  since: number | null
  clearBefore: number
  partition: number
  generation: string
}

/** What one flush statement writes: the latest results, the history rows, the running marks. */
export interface FlushBatch {
  results: RunRecord[]
  /** Per result: start of the reaktor's run in flight at the flush (its running_since), else null. */
  since: Array<number | null>
  history: HistoryRow[]
  marks: RunningMark[]
}

/** The largest value of an `integer` column. */
const MAX_INT = 2_147_483_647

/**
 * Durations (ms) that may be null, as an array literal for `integer` columns. A run that ignored its
 * signal can settle after 24.8 days, and a wall clock stepped back makes one negative: written at
 * the bound, since one value out of range would have the result and its history row refused.
 */
function durationArray (values: ReadonlyArray<number | null>): string {
  for (const v of values) if (v !== null && !Number.isInteger(v)) throw Object.assign(new TypeError(`not an integer: ${v}`), { code: '22023' })
  return '{' + values.map((v) => v === null ? 'NULL' : String(Math.min(Math.max(v, 0), MAX_INT))).join(',') + '}'
}

/**
 * One statement for a whole batch: the history rows (appended, or completed by run id: a timed-out
 * run's row is written at its timeout and again when it settles), the running marks of reaktors
 * without a result here, and the run results. The result columns (`last_run`, `last_error`,
 * ...) only move forward in time; the schedule columns (`next_run`, `owner`) are written only while
 * the row is still `running` under the version the run belonged to and its partition is still in
 * the generation the runner's node took it in, so a flush landing after a stop (or a stop + start,
 * or a takeover by another node after this one was fenced) never brings back a next run or an owner,
 * and the next run of a result whose run started before a pending run request stays at that request.
 * `blocked` is written under the partition's generation (a stopped reaktor's stuck run still blocks
 * it), else only cleared, by the run that set it: after a takeover the new owner runs the reaktor,
 * and a node that took its partition back learns from its stuck run when it settled. `running_since`
 * is set under the generation only (a fenced node never sets it) and cleared by the end of the run
 * it names (or of a later one). `last_error` is kept until the next failure. The marks and the
 * results never name the same reaktor (one row may be updated once per statement).
 */
export async function writeRunResults (db: Kysely<Database>, owner: string, batch: FlushBatch): Promise<number> {
  const { results, since, history, marks } = batch
  if (results.length === 0 && history.length === 0 && marks.length === 0) return 0
  const res = await sql`
    with h as (
      insert into polling_runs as r (run_id, reaktor_id, node, started_at, duration_ms, outcome, error)
      select h.run_id, h.reaktor_id, ${owner}::text, h.started_at, h.duration_ms, h.outcome, h.error
      from unnest(
        ${textArray(history.map((r) => r.runId))}::uuid[],
        ${textArray(history.map((r) => r.reaktorId))}::text[],
        ${textArray(history.map((r) => isoTime(r.startedAt)))}::timestamptz[],
        ${durationArray(history.map((r) => r.durationMs))}::int[],
        ${textArray(history.map((r) => r.outcome))}::text[],
        ${textArray(history.map((r) => r.error))}::text[]
      ) as h(run_id, reaktor_id, started_at, duration_ms, outcome, error)
      on conflict (run_id) do update set duration_ms = excluded.duration_ms, outcome = excluded.outcome, error = excluded.error
    ), m as (
      update polling_reaktors as p set running_since = m.since
      from (
        select m.*, coalesce(rp.generation = m.generation, false) as current_partition
        from unnest(
          ${textArray(marks.map((r) => r.reaktorId))}::text[],
          ${textArray(marks.map((r) => isoTime(r.since)))}::timestamptz[],
          ${textArray(marks.map((r) => isoTime(r.clearBefore)))}::timestamptz[],
          ${numberArray(marks.map((r) => r.partition))}::int[],
          ${textArray(marks.map((r) => r.generation))}::bigint[]
        ) as m(id, since, clear_before, partition, generation)
        left join reaktor_partitions as rp on rp.partition = m.partition
      ) as m
      where p.reaktor_id = m.id and case when m.since is not null then m.current_partition and p.running_since is distinct from m.since
                                         else p.running_since <= m.clear_before end
    )
    update polling_reaktors as p set
      last_run = v.last_run,
      last_run_id = v.run_id,
      last_error = case when v.failure_at is null then p.last_error else v.last_error end,
      last_success_at = coalesce(v.success_at, p.last_success_at),
      last_failure_at = coalesce(v.failure_at, p.last_failure_at),
      last_duration_ms = v.duration_ms,
      last_outcome = v.outcome,
      running_since = case when v.since is not null and v.current_partition then v.since
                           when p.running_since <= v.last_run then null else p.running_since end,
      consecutive_failures = v.failures,
      next_run = case when p.state = 'running' and p.state_version = v.version and v.current_partition
                      then ${keepRequestedRun} else p.next_run end,
      owner = case when p.state = 'running' and p.state_version = v.version and v.current_partition
                   then ${owner}::text else p.owner end,
      blocked = case when v.current_partition then v.blocked
                     when p.last_run_id = v.run_id then p.blocked and v.blocked else p.blocked end
    from (
      select v.*,
             coalesce(rp.generation = v.generation, false) as current_partition
      from unnest(
        ${textArray(results.map((r) => r.reaktorId))}::text[],
        ${textArray(results.map((r) => isoTime(r.lastRun)))}::timestamptz[],
        ${textArray(results.map((r) => r.runId))}::text[],
        ${textArray(results.map((r) => r.lastError))}::text[],
        ${numberArray(results.map((r) => r.consecutiveFailures))}::int[],
        ${textArray(results.map((r) => isoTime(r.nextRun)))}::timestamptz[],
        ${textArray(results.map((r) => r.version))}::bigint[],
        ${numberArray(results.map((r) => r.partition))}::int[],
        ${textArray(results.map((r) => r.generation))}::bigint[],
        ${`{${results.map((r) => r.blocked === true ? 't' : 'f').join(',')}}`}::boolean[],
        ${textArray(results.map((r) => r.outcome))}::text[],
        ${durationArray(results.map((r) => r.durationMs))}::int[],
        ${textArray(results.map((r) => isoTime(r.successAt)))}::timestamptz[],
        ${textArray(results.map((r) => isoTime(r.failureAt)))}::timestamptz[],
        ${textArray(since.map(isoTime))}::timestamptz[]
      ) as v(id, last_run, run_id, last_error, failures, next_run, version, partition, generation, blocked,
             outcome, duration_ms, success_at, failure_at, since)
      left join reaktor_partitions as rp on rp.partition = v.partition
    ) as v
    where p.reaktor_id = v.id and (p.last_run is null or p.last_run <= v.last_run)
  `.execute(db)
  return Number(res.numAffectedRows ?? 0)
}
