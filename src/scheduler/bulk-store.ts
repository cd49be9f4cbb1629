import { sql, type Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import { startRows, stopRows, type StateWrite, type Versions } from './reaktor-store.js'

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
          ? await startRows(trx, ids, intervals, partitions, at)
          : await stopRows(trx, ids, intervals, partitions, at)
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
