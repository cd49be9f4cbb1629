import { sql, type Kysely, type RawBuilder } from 'kysely'
import type { Database } from '../db/schema.js'

/**
 * Run now (docs/operating.md "Run now"): any node takes the request, the reaktor's owner runs it.
 *
 * The request is ONE statement on a `running` row: it records when the run was requested
 * (`run_requested_at`), brings `next_run` forward to that moment, and sends a NOTIFY on a channel
 * of its own (payload: the reaktor id), all on commit. The owner hears the NOTIFY on its lock
 * connection and asks the reaktor's runner for a run (PartitionRunners.runNow); every other node
 * ignores it. The row is what makes the request outlive its owner: a node taking the partition over
 * (after a handover, a crash, a fencing) continues from the stored `next_run`, which the request
 * brought forward. And a run that was in flight at the request, its result flushed afterwards,
 * must not push `next_run` back past the request: `keepRequestedRun` in the batched write keeps it
 * there while the request is pending (requested after the start of the run being written, or in
 * the same millisecond).
 */

/** LISTEN/NOTIFY channel of run requests; the payload is the request's time (epoch ms), a space, the reaktor id. */
export const RUN_NOW_CHANNEL = 'reaktor_polling_run'

/**
 * The reaktor id and request time of a notification. The time lets the owner tell a request that
 * the run in flight (or the one just ended) already serves, heard late, from a new one.
 */
export function parseRunRequest (payload: string): [reaktorId: string, requestedAt: number | undefined] {
  const space = payload.indexOf(' ')
  const at = space > 0 ? Number(payload.slice(0, space)) : NaN
  return Number.isFinite(at) ? [payload.slice(space + 1), at] : [payload, undefined]
}

/**
 * Writes a run request and notifies the owner, in one statement. False when the reaktor is stopped
 * (nothing is written: a stop wins over a request that reaches the row after it).
 */
export async function writeRunRequest (db: Kysely<Database>, reaktorId: string, at: Date): Promise<boolean> {
  // A blocked reaktor keeps its next run unset: it runs when its stuck run settles (which then
  // finds the request pending), or at once on a takeover.
  const { rows } = await sql`
    with requested as (
      update polling_reaktors as p
      set run_requested_at = greatest(p.run_requested_at, ${at}::timestamptz),
          next_run = case when p.blocked then p.next_run else least(p.next_run, ${at}::timestamptz) end
      where p.reaktor_id = ${reaktorId} and p.state = 'running'
      returning p.reaktor_id
    )
    select pg_notify(${RUN_NOW_CHANNEL}, ${`${at.getTime()} `}::text || reaktor_id) from requested
  `.execute(db)
  return rows.length > 0
}

/**
 * The next run a batched result writes (`p`: the row, `v`: the result with its run's `last_run`
 * and planned `next_run`): that next run, or the pending request's time when that is earlier. A
 * result that leaves the next run unset (a run blocked past its timeout) keeps it unset. A request
 * in the same millisecond as the run's start is still pending (as for the runner, runNow): it may
 * have come after that run.
 */
export const keepRequestedRun: RawBuilder<unknown> = sql`case when v.next_run is not null and p.run_requested_at >= v.last_run
  then least(v.next_run, p.run_requested_at) else v.next_run end`
