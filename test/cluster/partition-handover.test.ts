/**
 * Partition handover under load: 600 back-to-back reaktors while nodes join and leave. Every run
 * of every node goes into one ledger (reaktor, node, start, end, how it ended); the test proves on
 * it that no two runs of a reaktor overlapped, that the handovers aborted no run, and that every
 * reaktor kept running after each change.
 */
import t from 'tap'
import { sql } from 'kysely'
import type { PollingReaktorRegistration } from '../../src/sdk/types.js'
import type { Scheduler } from '../../src/scheduler/index.js'
import { deadline, waitFor } from '../helpers/timing.js'
import { openTestDatabase, registry, scheduler, work } from '../helpers/scheduler.js'

interface LedgerRun { id: string, node: string, start: number, end?: number, aborted?: string }

const N = 600

t.test('handover under load: nodes join and leave, no run overlaps, none is aborted by a handover', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const ledger: LedgerRun[] = []
  const registrations = (node: string): PollingReaktorRegistration[] => Array.from({ length: N }, (_v, i) => ({
    reaktorDefinitionId: `load-${i}`,
    interval: '1s',
    autoStart: true,
    createReaktor: () => async (_input, context) => {
      const run: LedgerRun = { id: `load-${i}`, node, start: performance.now() }
      ledger.push(run)
      context.signal.addEventListener('abort', () => { run.aborted = String((context.signal.reason as Error)?.message) })
      await work(5 + (i % 10), context.signal)
      run.end = performance.now()
      return true
    }
  }))
  const nodes = new Map<string, Scheduler>()
  const join = async (node: string): Promise<void> => {
    const s = scheduler(t, db, url, { nodeId: node, reaktors: registry(registrations(node), {}, 'load'), flushIntervalMs: 100 })
    nodes.set(node, s)
    await s.start()
  }
  /** Every reaktor owned by exactly one live node, and each of them holding about its share. */
  const settled = (): boolean => {
    const owned = [...nodes.values()].map((s) => s.ownedReaktorIds())
    const all = new Set(owned.flat())
    return all.size === N && owned.flat().length === N && owned.every((ids) => ids.length >= N / nodes.size * 0.7)
  }
  /** Every reaktor has started a run since `from` (performance.now()). */
  const allRanSince = (from: number): boolean => new Set(ledger.filter((r) => r.start >= from).map((r) => r.id)).size === N

  await join('node-a')
  await waitFor(() => allRanSince(0), { what: 'every reaktor to run on node-a' })
  let mark = performance.now()
  await join('node-b')
  await waitFor(settled, { timeoutMs: deadline(20_000), what: 'the spread over two nodes' })
  await waitFor(() => allRanSince(mark), { what: 'every reaktor to run after node-b joined' })
  mark = performance.now()
  await join('node-c')
  await waitFor(settled, { timeoutMs: deadline(20_000), what: 'the spread over three nodes' })
  await waitFor(() => allRanSince(mark), { what: 'every reaktor to run after node-c joined' })
  const spread = [...nodes].map(([node, s]) => `${node} ${s.ownedReaktorIds().length}`).join(', ')
  t.pass(`three nodes: ${spread}`)
  // Every node's results reach the rows, whoever took the partition last: the stored next run of
  // these back-to-back reaktors follows their runs (a write refused as stale would freeze it).
  const stale = await waitFor(async () => {
    const { rows } = await sql<{ stale: number, owners: number }>`
      select count(*) filter (where next_run < now() - interval '2 s')::int as stale, count(distinct owner)::int as owners
      from polling_reaktors where state = 'running'`.execute(db)
    return rows[0].stale === 0 && rows[0].owners === 3 ? rows[0] : undefined
  }, { what: 'every stored next run to be fresh, written by all three nodes' })
  t.same(stale, { stale: 0, owners: 3 })
  const aborts = ledger.filter((r) => r.aborted !== undefined)
  t.same(aborts.map((r) => `${r.id}@${r.node}: ${String(r.aborted)}`), [], 'no run was aborted by a handover')

  // node-a leaves (graceful shutdown aborts its in-flight runs; that is a shutdown, not a handover).
  mark = performance.now()
  await nodes.get('node-a')!.stop()
  nodes.delete('node-a')
  await waitFor(settled, { timeoutMs: deadline(20_000), what: 'the spread over the two survivors' })
  await waitFor(() => allRanSince(mark), { what: 'every reaktor to run after node-a left' })
  t.same(ledger.filter((r) => r.aborted !== undefined && !(r.node === 'node-a' && /shutdown/.test(r.aborted))).map((r) => `${r.id}@${r.node}: ${String(r.aborted)}`), [],
    'only the leaving node\'s shutdown aborted runs')

  // The ledger: no two runs of one reaktor overlap, across all nodes.
  for (const s of nodes.values()) await s.stop()
  const byId = new Map<string, LedgerRun[]>()
  for (const run of ledger) byId.set(run.id, [...(byId.get(run.id) ?? []), run])
  const overlaps: string[] = []
  for (const [id, runs] of byId) {
    runs.sort((a, b) => a.start - b.start)
    for (let i = 1; i < runs.length; i++) {
      const prev = runs[i - 1]
      if (prev.end === undefined || prev.end > runs[i].start) overlaps.push(`${id}: ${prev.node} until ${String(prev.end)} vs ${runs[i].node} from ${runs[i].start}`)
    }
  }
  t.same(overlaps.slice(0, 10), [], `no overlap in ${ledger.length} runs of ${N} reaktors`)
  t.ok(new Set(ledger.map((r) => r.node)).size === 3, 'runs on all three nodes')
})
