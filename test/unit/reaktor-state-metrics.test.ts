/**
 * ReaktorStateMetrics against a database whose answers the test hands out: one read per scrape
 * shared by its metrics, a read still out joined rather than sent again, and only the partitions
 * held at the end of a scrape exported.
 */
import t from 'tap'
import { Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler, type CompiledQuery, type DatabaseConnection, type QueryResult } from 'kysely'
import { Registry } from 'prom-client'
import type { Database } from '../../src/db/schema.js'
import { ReaktorStateMetrics } from '../../src/metrics/reaktor-state.js'
import { byReaktor, parseMetrics } from '../helpers/metrics.js'

interface Row { reaktor_id: string, state: string, consecutive_failures: number, last_success_at: Date | null }

/** A Kysely whose every statement waits until the test answers it. */
function scriptedDatabase (): { db: Kysely<Database>, pending: Array<{ query: CompiledQuery, answer: (rows: Row[]) => void, fail: (err: Error) => void }> } {
  const pending: Array<{ query: CompiledQuery, answer: (rows: Row[]) => void, fail: (err: Error) => void }> = []
  const connection: DatabaseConnection = {
    executeQuery: async <R>(query: CompiledQuery): Promise<QueryResult<R>> => await new Promise<QueryResult<R>>((resolve, reject) => {
      pending.push({ query, answer: (rows) => resolve({ rows: rows as R[] }), fail: reject })
    }),
    streamQuery: () => { throw new Error('not used') }
  }
  const db = new Kysely<Database>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createIntrospector: (k) => new PostgresIntrospector(k),
      createQueryCompiler: () => new PostgresQueryCompiler(),
      createDriver: () => ({
        init: async () => {},
        acquireConnection: async () => connection,
        beginTransaction: async () => {},
        commitTransaction: async () => {},
        rollbackTransaction: async () => {},
        releaseConnection: async () => {},
        destroy: async () => {}
      })
    }
  })
  return { db, pending }
}

const PARTITION: Record<string, number> = { 'r-1': 1, 'r-2': 2, 'r-3': 3 }
const row = (id: string, failures: number): Row => ({ reaktor_id: id, state: 'running', consecutive_failures: failures, last_success_at: null })

t.test('one read per scrape; a late read is joined, not repeated; only partitions still held are exported', async (t) => {
  const { db, pending } = scriptedDatabase()
  let held = [1, 2, 3]
  const metrics = new ReaktorStateMetrics({ db, heldPartitions: () => held, partitionOf: (id) => PARTITION[id], timeoutMs: 100 })
  const registry = new Registry()
  metrics.register(registry)
  const turn = async (): Promise<void> => await new Promise<void>((resolve) => setImmediate(resolve))
  const scrape = async (): Promise<{ failures: Record<string, number>, readFailures: number | undefined }> => {
    const samples = parseMetrics(await registry.metrics())
    return {
      failures: Object.fromEntries(byReaktor(samples, 'reaktor_polling_consecutive_failures')),
      readFailures: samples.find((s) => s.name === 'reaktor_polling_state_read_failures_total')?.value
    }
  }

  const first = scrape()
  await turn()
  t.equal(pending.length, 1, 'the four metrics of a scrape share one statement')
  t.same(pending[0].query.parameters, [[1, 2, 3]], 'for the held partitions')
  pending.shift()!.answer([row('r-1', 1), row('r-2', 2), row('r-3', 3), row('unregistered', 9)])
  t.same(await first, { failures: { 'r-1': 1, 'r-2': 2, 'r-3': 3 }, readFailures: 0 }, 'the registered ids of the held partitions')

  // A database that answers nothing: the scrape ends at the timeout with the values read before.
  const late = scrape()
  await turn()
  t.equal(pending.length, 1)
  t.same(await late, { failures: { 'r-1': 1, 'r-2': 2, 'r-3': 3 }, readFailures: 1 }, 'late: the values read before, counted')
  const again = scrape()
  await turn()
  t.equal(pending.length, 1, 'the read still out is waited for again, not sent twice')
  // Partition 2 handed over meanwhile: its reaktor is the new holder's to export.
  held = [1, 3]
  t.same(await again, { failures: { 'r-1': 1, 'r-3': 3 }, readFailures: 2 }, 'only the partitions still held')

  // The late read is answered after all: its values are the ones shown when the next read fails.
  pending.shift()!.answer([row('r-1', 4), row('r-2', 5), row('r-3', 6)])
  await turn()
  const failed = scrape()
  await turn()
  t.equal(pending.length, 1)
  t.same(pending[0].query.parameters, [[1, 3]], 'a new read, for the partitions held now')
  pending.shift()!.fail(new Error('connection refused'))
  t.same(await failed, { failures: { 'r-1': 4, 'r-3': 6 }, readFailures: 3 }, 'failed: the values of the last answered read, counted')

  held = []
  t.same(await scrape(), { failures: {}, readFailures: 3 }, 'no partition held: nothing exported')
  t.equal(pending.length, 0, 'and nothing read')
})
