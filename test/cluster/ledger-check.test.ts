/**
 * The cluster tests' overlap check (test/helpers/cluster.ts overlappingRuns) on a ledger written
 * here: no processes, so that the moments are exact.
 */
import type { ChildProcess } from 'node:child_process'
import t from 'tap'
import { createTestDatabase } from '../helpers/database.js'
import { Cluster, overlappingRuns, type NodeProcess } from '../helpers/cluster.js'

const T = Date.parse('2026-01-01T00:00:00.000Z')

function pastProcess (nodeId: string, startedAt: number, exitedAt: number, killedAt?: number): NodeProcess {
  const child = { exitCode: killedAt === undefined ? 0 : null, signalCode: killedAt === undefined ? null : 'SIGKILL' } as unknown as ChildProcess
  return { nodeId, child, url: '', output: () => '', exited: Promise.resolve(0), startedAt, exitedAt, killedAt }
}

t.test('a killed process\'s unfinished runs end when it was killed, not when the test saw it exit', async (t) => {
  const cluster = new Cluster(t, await createTestDatabase(t))
  // The fixture app's table (test/fixtures/cluster-app/ledger/index.js).
  await cluster.sql.query(`create table cluster_ledger (run_id text primary key, reaktor_id text not null, node_id text not null,
    started_at timestamptz not null, ended_at timestamptz, outcome text, lock_held boolean not null)`)
  // node-a killed at T; the test saw its exit 150 ms later (as late as measured on two busy cores).
  cluster.history.push(pastProcess('node-a', T - 60_000, T + 150, T))
  // node-c stopped with SIGTERM (its exit is the end of an unwritten run), node-b still alive.
  cluster.history.push(pastProcess('node-c', T - 60_000, T + 5000))
  const runs: Array<[string, string, string, number, number | null]> = [
    // In flight on node-a when it was killed; node-b took over 80 ms after the kill (failovers of
    // 69 ms were measured): no overlap, the dead process ran nothing after T.
    ['a-1', 'busy-1', 'node-a', T - 40, null],
    ['b-1', 'busy-1', 'node-b', T + 80, T + 180],
    // Real overlaps must still show: a run that started on node-b before node-a's run was killed,
    ['a-2', 'busy-2', 'node-a', T - 40, null],
    ['b-2', 'busy-2', 'node-b', T - 10, T + 90],
    // two finished runs overlapping,
    ['a-3', 'busy-3', 'node-a', T - 500, T - 400],
    ['b-3', 'busy-3', 'node-b', T - 450, T - 350],
    // and a run left without an end by a process that exited (not killed) against a run started before it exited.
    ['c-4', 'busy-4', 'node-c', T + 1000, null],
    ['b-4', 'busy-4', 'node-b', T + 4000, T + 4100]
  ]
  for (const [runId, reaktorId, nodeId, start, end] of runs) {
    await cluster.sql.query('insert into cluster_ledger values ($1, $2, $3, $4, $5, null, true)',
      [runId, reaktorId, nodeId, new Date(start), end === null ? null : new Date(end)])
  }
  const overlaps = await overlappingRuns(cluster)
  t.same(overlaps.map((o) => `${o.reaktor_id}: ${o.a} ${o.b}`).sort(), ['busy-2: a-2 b-2', 'busy-3: a-3 b-3', 'busy-4: b-4 c-4'],
    `only the real overlaps: ${JSON.stringify(overlaps)}`)
})
