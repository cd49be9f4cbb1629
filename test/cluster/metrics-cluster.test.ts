/**
 * The per-reaktor gauges of /metrics across a cluster of three processes: the scrapes of all
 * nodes together have every registered reaktor exactly once (from the node holding its
 * partition's lock), again after a node is killed and its partitions move, and the failure count
 * carries on from the stored row instead of starting over on the new holder.
 */
import t from 'tap'
import fs from 'node:fs/promises'
import path from 'node:path'
import { Cluster } from '../helpers/cluster.js'
import { tempDir } from '../helpers/temp-dir.js'
import { bound, deadline, waitFor } from '../helpers/timing.js'
import { createTestDatabase } from '../helpers/database.js'
import { parseMetrics } from '../helpers/metrics.js'
import { partitionOf } from '../../src/scheduler/ownership/partitions.js'

const PARTITIONS = 12
const OK = ['mc-ok-1', 'mc-ok-2', 'mc-ok-3', 'mc-ok-4', 'mc-ok-5', 'mc-ok-6', 'mc-ok-7', 'mc-ok-8']
const FAILING = 'mc-fail'
const STOPPED = 'mc-stopped'
const REGISTERED = [...OK, FAILING, STOPPED].sort()
/** The test's scrape rounds come this far apart: what it sees is up to one round late. */
const SCRAPE_ROUND_MS = 250
/** docs/cluster.md: a crashed node's partitions are held by none for about 1 s (a takeover, as the other cluster tests'), seen at the next scrape round. */
const EXPORTED_AGAIN_MS = bound(1000, 'takeover') + SCRAPE_ROUND_MS
const GAUGES = ['reaktor_polling_last_success_timestamp_seconds', 'reaktor_polling_consecutive_failures', 'reaktor_polling_running']

/** An app whose reaktors succeed, fail, or stay stopped (no ledger: these runs need no witness). */
async function appsDir (t: Parameters<typeof tempDir>[0]): Promise<string> {
  const dir = await tempDir(t, 'reaktor-metrics-apps-')
  await fs.mkdir(path.join(dir, 'metrics-cluster'))
  await fs.writeFile(path.join(dir, 'metrics-cluster', 'package.json'), JSON.stringify({ name: 'metrics-cluster', version: '1.0.0', type: 'module' }))
  await fs.writeFile(path.join(dir, 'metrics-cluster', 'index.js'), `
const reaktor = (id, autoStart, run) => ({ reaktorDefinitionId: id, interval: '3s', autoStart, createReaktor: () => run })
export const pollingReaktors = [
  ...${JSON.stringify(OK)}.map((id) => reaktor(id, true, async () => false)),
  reaktor(${JSON.stringify(FAILING)}, true, async () => { throw new Error('fails every run') }),
  reaktor(${JSON.stringify(STOPPED)}, false, async () => false)
]
`)
  return dir
}

/** One scrape of every live node: per gauge, per reaktor, who exported which value. */
interface Round {
  gauges: Map<string, Map<string, Array<{ node: string, value: number }>>>
  partitionsHeld: number
}

async function scrapeAll (cluster: Cluster): Promise<Round> {
  const gauges = new Map(GAUGES.map((g) => [g, new Map<string, Array<{ node: string, value: number }>>()]))
  let partitionsHeld = 0
  for (const [nodeId, node] of cluster.nodes) {
    const res = await fetch(`${node.url}/metrics`)
    if (res.status !== 200) throw new Error(`${nodeId}: /metrics answered ${res.status}`)
    for (const s of parseMetrics(await res.text())) {
      if (s.name === 'reaktor_polling_partitions_held') partitionsHeld += s.value
      const byReaktor = gauges.get(s.name)
      if (byReaktor === undefined) continue
      const seen = byReaktor.get(s.labels.reaktor) ?? []
      seen.push({ node: s.labels.node, value: s.value })
      byReaktor.set(s.labels.reaktor, seen)
    }
  }
  return { gauges, partitionsHeld }
}

/** Every partition held, each gauge with exactly the registered reaktors once, each from its lock holder (running ones: pg_locks). */
async function settled (cluster: Cluster, round: Round): Promise<boolean> {
  if (round.partitionsHeld !== PARTITIONS) return false
  for (const byReaktor of round.gauges.values()) {
    if ([...byReaktor.keys()].sort().join() !== REGISTERED.join()) return false
    if ([...byReaktor.values()].some((seen) => seen.length !== 1)) return false
  }
  const holders = await cluster.lockHolders(REGISTERED)
  return [...holders].every(([id, node]) => round.gauges.get('reaktor_polling_running')!.get(id)![0].node === node)
}

t.test('three nodes: each registered reaktor exported once, by its partition holder; failures carry on when it moves', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const cluster = new Cluster(t, databaseUrl, { REAKTOR_APPS_DIR: await appsDir(t), PARTITIONS: String(PARTITIONS) })
  for (const nodeId of ['node-a', 'node-b', 'node-c']) await cluster.start(nodeId)
  // A row of an id none of the nodes registers (an app removed): never exported.
  await cluster.sql.query(`insert into polling_reaktors (reaktor_id, state, interval, partition, consecutive_failures) values ('mc-gone', 'running', '3s', $1, 4)`,
    [partitionOf('mc-gone', PARTITIONS)])
  const unregisteredSeen: string[] = []
  const round = async (): Promise<Round> => {
    const r = await scrapeAll(cluster)
    for (const [g, byReaktor] of r.gauges) for (const id of byReaktor.keys()) if (!REGISTERED.includes(id)) unregisteredSeen.push(`${g}{reaktor="${id}"}`)
    return r
  }
  const failures = (r: Round): { node: string, value: number } => r.gauges.get('reaktor_polling_consecutive_failures')!.get(FAILING)![0]

  const before = await waitFor(async () => {
    const r = await round()
    return await settled(cluster, r) && failures(r).value >= 2 ? r : undefined
  }, { timeoutMs: deadline(60_000), intervalMs: SCRAPE_ROUND_MS, what: 'every reaktor exported once by the three nodes, and mc-fail to have failed twice' })
  t.pass('three nodes: every registered reaktor exactly once in each gauge, from the node holding its partition')
  const running = Object.fromEntries([...before.gauges.get('reaktor_polling_running')!].map(([id, [{ value }]]) => [id, value]))
  t.same(running, Object.fromEntries(REGISTERED.map((id) => [id, id === STOPPED ? 0 : 1])), 'running: 1 for the started reaktors, 0 for the stopped one')
  t.equal(before.gauges.get('reaktor_polling_last_success_timestamp_seconds')!.get(FAILING)![0].value, 0, 'never succeeded: 0')
  const exporters = new Set([...before.gauges.get('reaktor_polling_running')!.values()].map(([{ node }]) => node))
  t.ok(exporters.size >= 2, `the reaktors are spread: exported by ${[...exporters].sort().join(', ')}`)

  // The node holding mc-fail's partition dies; the others take its partitions over.
  const { node: holder, value: failedBefore } = failures(before)
  const killedAt = await cluster.kill9(holder)
  const afterMove: number[] = []
  let settledAfterMs: number | undefined
  const after = await waitFor(async () => {
    const r = await round()
    const f = r.gauges.get('reaktor_polling_consecutive_failures')!.get(FAILING)
    if (f !== undefined) afterMove.push(...f.map((x) => x.value))
    if (!await settled(cluster, r)) return undefined
    settledAfterMs ??= Date.now() - killedAt
    return failures(r).value > failedBefore ? r : undefined
  }, { timeoutMs: deadline(60_000), intervalMs: SCRAPE_ROUND_MS, what: `every reaktor exported once by the two nodes left, and mc-fail to fail again after ${holder} was killed` })
  t.pass(`after ${holder} was killed: every registered reaktor exactly once in each gauge, from the two nodes left`)
  t.ok(settledAfterMs !== undefined && settledAfterMs <= EXPORTED_AGAIN_MS, `every reaktor exported again ${settledAfterMs} ms after the kill (bound ${EXPORTED_AGAIN_MS} ms)`)
  t.not(failures(after).node, holder, `mc-fail moved from ${holder} to ${failures(after).node}`)
  t.ok(afterMove.length > 0 && Math.min(...afterMove) >= failedBefore,
    `consecutive failures carried on from ${failedBefore} (seen after the move: ${afterMove.join(', ')}), never starting over`)
  t.same(unregisteredSeen, [], 'mc-gone (registered by no node) never exported')
  t.comment(`measured: ${JSON.stringify({ killed: holder, settledAfterMs, failuresBefore: failedBefore, seenAfterMove: afterMove })}`)
})
