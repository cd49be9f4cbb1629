import { sql, type Kysely, type Transaction } from 'kysely'
import type { Database } from '../db/schema.js'
import { NOTIFY_CHANNEL, startOnConflict, type StateWrite } from './store.js'

/**
 * The SQL of bulk start and stop: many reaktors in ONE transaction, so that either every state
 * write and its NOTIFY commits or none does (NOTIFYs are delivered only on commit). The rows are
 * locked in id order, so two bulk actions (or a bulk and a single one) over the same reaktors
 * wait for each other instead of deadlocking.
 */

/**
 * The batched run results lock the rows they write in their own order, so a bulk action over
 * running reaktors can meet a flush in a deadlock (seen: 2 in 80 bulk actions over 1,500 of 3,000
 * reaktors running every 50 ms). PostgreSQL then aborts one of the two; when that is the bulk
 * transaction, nothing of it was written, and it is run again.
 */
const DEADLOCK_DETECTED = '40P01'
const DEADLOCK_ATTEMPTS = 3

/** A registered reaktor to write, with what its row must carry (as writeStart/writeStop take them). */
export interface BulkTarget {
  reaktorId: string
  interval: string
  partition: number | null
}

/** Per target, in the order given: whether its state changed, and its row's version after the write. */
export type BulkWrite = StateWrite & { reaktorId: string }

export async function writeBulk (db: Kysely<Database>, action: 'start' | 'stop', targets: readonly BulkTarget[], at: Date): Promise<BulkWrite[]> {
  if (targets.length === 0) return []
  const sorted = [...targets].sort((a, b) => (a.reaktorId < b.reaktorId ? -1 : a.reaktorId > b.reaktorId ? 1 : 0))
  const ids = sorted.map((t) => t.reaktorId)
  const intervals = sorted.map((t) => t.interval)
  const partitions = sorted.map((t) => t.partition)
  let versions: Versions | undefined
  for (let attempt = 1; versions === undefined; attempt++) {
    try {
      versions = await db.transaction().execute(async (trx) => {
        await sql`select 1 from polling_reaktors where reaktor_id = any(${ids}::text[]) order by reaktor_id for update`.execute(trx)
        return action === 'start'
          ? await startAll(trx, ids, intervals, partitions, at)
          : await stopAll(trx, ids, intervals, partitions, at)
      })
    } catch (err) {
      if ((err as { code?: unknown }).code !== DEADLOCK_DETECTED || attempt >= DEADLOCK_ATTEMPTS) throw err
    }
  }
  return targets.map((t) => {
    const written = versions.get(t.reaktorId)
    return { reaktorId: t.reaktorId, changed: written?.changed ?? false, version: written?.version ?? null }
  })
}

type Versions = Map<string, StateWrite>

interface VersionRow { reaktor_id: string, state_version: string }

/** As writeStart, for many: a `stopped` (or missing) row becomes `running`, its first run due at once. */
async function startAll (trx: Transaction<Database>, ids: string[], intervals: string[], partitions: Array<number | null>, at: Date): Promise<Versions> {
  const { rows } = await sql<VersionRow>`
    with changed as (
      insert into polling_reaktors as p (reaktor_id, state, interval, next_run, updated_at, state_version, partition)
      select v.id, 'running', v.interval, ${at}::timestamptz, ${at}::timestamptz, 1, v.partition
      from unnest(${ids}::text[], ${intervals}::text[], ${partitions}::int[]) as v(id, interval, partition)
      ${startOnConflict}
    )
    select reaktor_id, state_version, pg_notify(${NOTIFY_CHANNEL}, reaktor_id) from changed
  `.execute(trx)
  return new Map(rows.map((r) => [r.reaktor_id, { changed: true, version: String(r.state_version) }]))
}

/**
 * As writeStop, for many: a `running` row becomes `stopped`; every other target keeps its state
 * (a missing row is created stopped) and reports its version, which the caller's runners must not
 * fall behind (any older read of the row predates this stop).
 */
async function stopAll (trx: Transaction<Database>, ids: string[], intervals: string[], partitions: Array<number | null>, at: Date): Promise<Versions> {
  const { rows: stopped } = await sql<VersionRow>`
    with changed as (
      update polling_reaktors as p
      set state = 'stopped', next_run = null, owner = null, updated_at = ${at}::timestamptz,
          state_version = p.state_version + 1
      where p.reaktor_id = any(${ids}::text[]) and p.state = 'running'
      returning p.reaktor_id, p.state_version
    )
    select reaktor_id, state_version, pg_notify(${NOTIFY_CHANNEL}, reaktor_id) from changed
  `.execute(trx)
  const versions: Versions = new Map(stopped.map((r) => [r.reaktor_id, { changed: true, version: String(r.state_version) }]))
  const rest = ids.flatMap((id, i) => versions.has(id) ? [] : [i])
  if (rest.length === 0) return versions
  const restIds = rest.map((i) => ids[i])
  // The rows inserted here are not visible to the second select of the same statement: no id twice.
  const { rows: current } = await sql<VersionRow>`
    with inserted as (
      insert into polling_reaktors (reaktor_id, state, interval, updated_at, partition)
      select v.id, 'stopped', v.interval, ${at}::timestamptz, v.partition
      from unnest(${restIds}::text[], ${rest.map((i) => intervals[i])}::text[], ${rest.map((i) => partitions[i])}::int[]) as v(id, interval, partition)
      on conflict (reaktor_id) do nothing
      returning reaktor_id, state_version
    )
    select reaktor_id, state_version from inserted
    union all
    select reaktor_id, state_version from polling_reaktors where reaktor_id = any(${restIds}::text[])
  `.execute(trx)
  for (const r of current) versions.set(r.reaktor_id, { changed: false, version: String(r.state_version) })
  return versions
}
