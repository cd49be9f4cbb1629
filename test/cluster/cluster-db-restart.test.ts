/**
 * A PostgreSQL restart under a running cluster of real processes. The test starts its own embedded
 * PostgreSQL (restarting the run's shared server would disturb the other test files) and restarts
 * it on the same port: every node must notice, fence, report 503 on /readyz, reconnect by itself
 * with backoff and resume, with no state lost and no overlapping run in the ledger.
 */
import t from 'tap'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded.js'
import { deadline, waitFor } from '../helpers/timing.js'
import { ALL_REAKTORS, BUSY, Cluster, firstRuns, overlappingRuns } from '../helpers/cluster.js'
import { silentLogger } from '../helpers/log.js'

/** The status of /readyz, 0 when unreachable; the body is read, so no connection is left half-used. */
async function readyz (url: string, seen: string[] = []): Promise<number> {
  return await fetch(`${url}/readyz`).then(async (r) => {
    seen.push(`${r.status} ${await r.text()}`)
    return r.status
  }, (err) => {
    seen.push(String(err))
    return 0
  })
}

/** The messages of the error lines (level 50+) a node logged: what a failure report needs. */
function errorLines (output: string): string {
  return output.split('\n').filter((line) => /"level":(5|6)\d/.test(line)).map((line) => line.slice(0, 300)).slice(0, 5).join(' | ')
}

t.test('database restart: nodes reconnect by themselves, /readyz is 503 meanwhile, nothing lost, no overlap', async (t) => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'reaktor-db-restart-'))
  let server: EmbeddedPostgres = await startEmbeddedPostgres({ dataDir, log: silentLogger })
  const port = Number(new URL(server.url).port)
  const cluster = new Cluster(t, server.url)
  t.teardown(async () => {
    await server.stop().catch(() => {})
    await fs.rm(dataDir, { recursive: true, force: true })
  })

  await Promise.all([cluster.start('node-a'), cluster.start('node-b')])
  t.equal((await cluster.api('node-a', 'POST', '/polling/manual/start')).status, 200)
  t.equal((await cluster.api('node-b', 'POST', '/polling/paced/stop')).status, 200)
  const running = ALL_REAKTORS.filter((id) => id !== 'paced')
  await waitFor(async () => (await cluster.lockHolders()).size === running.length, { timeoutMs: deadline(10_000), intervalMs: 200, what: 'every running reaktor owned' })
  await waitFor(async () => {
    const ran = new Set((await cluster.ledger()).map((r) => r.reaktor_id))
    return running.every((id) => ran.has(id))
  },
    { timeoutMs: deadline(10_000), intervalMs: 200, what: 'runs of every running reaktor' })
  const { rows: before } = await cluster.sql.query('select reaktor_id, state, state_version from polling_reaktors order by reaktor_id')
  const runsBefore = (await cluster.ledger()).length

  await server.stop()
  const downAt = Date.now()
  for (const nodeId of ['node-a', 'node-b']) {
    const node = cluster.node(nodeId)
    const seen: string[] = []
    await waitFor(async () => await readyz(node.url, seen) === 503, { timeoutMs: deadline(10_000), intervalMs: 100, what: `${nodeId} /readyz 503` })
      .catch((err) => { throw new Error(`${String(err)}; last answers: ${seen.slice(-3).join(' | ')}; exit code ${node.child.exitCode}; errors logged: ${errorLines(node.output())}`) })
    t.match(node.output(), /all runs aborted \(fencing\)/, `${nodeId}: fenced when the database went away`)
  }
  // Keep the database away for three failed reconnects of each node: the backoff must grow.
  for (const nodeId of ['node-a', 'node-b']) {
    const node = cluster.node(nodeId)
    const retries = await waitFor(() => {
      const delays = [...node.output().matchAll(/"retryInMs":(\d+).*reconnect failed/g)].map((m) => Number(m[1]))
      return delays.length >= 3 ? delays : undefined
    }, { timeoutMs: deadline(20_000), intervalMs: 100, what: `${nodeId} to log three reconnect attempts` })
    t.ok(retries[2] > retries[0], `${nodeId}: reconnect backoff grows (${retries.join(', ')} ms)`)
  }
  t.pass('/readyz answers 503 on every node while the database is gone, and the nodes retry with backoff')

  server = await startEmbeddedPostgres({ dataDir, port, log: silentLogger })
  const upAt = Date.now()
  t.comment(`database down for ${upAt - downAt} ms`)
  for (const nodeId of ['node-a', 'node-b']) {
    const node = cluster.node(nodeId)
    await waitFor(async () => await readyz(node.url) === 200, { timeoutMs: deadline(20_000), intervalMs: 100, what: `${nodeId} /readyz 200 again` })
    // The log line travels through the child's stdout, which may trail its HTTP answer.
    await waitFor(() => /lock connection re-established/.test(node.output()), { timeoutMs: deadline(10_000), intervalMs: 50, what: `${nodeId} to log its reconnect` })
    t.pass(`${nodeId}: reconnected by itself`)
  }
  const firsts = await waitFor(async () => {
    const first = firstRuns(await cluster.ledger('started_at > $1', [new Date(upAt)]))
    return BUSY.every((id) => first.has(id)) ? first : undefined
  }, { timeoutMs: deadline(20_000), intervalMs: 100, what: 'every busy reaktor to run again' })
  const resumeMs = Math.max(...BUSY.map((id) => firsts.get(id)!.started_at.getTime() - upAt))
  t.ok(resumeMs < deadline(10_000), `every busy reaktor ran again ${resumeMs} ms after the database was back`)

  const { rows: after } = await cluster.sql.query('select reaktor_id, state, state_version from polling_reaktors order by reaktor_id')
  t.same(after, before, 'no state lost or changed by the restart (paced stays stopped, manual running)')
  await waitFor(async () => (await cluster.lockHolders()).size === running.length, { timeoutMs: deadline(10_000), intervalMs: 200, what: 'every running reaktor owned again' })
  const spread = await waitFor(async () => {
    const s = await cluster.spread()
    return Object.values(s).every((c) => c >= 1 && c <= Math.ceil(running.length / 2) + 1) ? s : undefined
  }, { timeoutMs: deadline(15_000), intervalMs: 200, what: 'the spread to settle again' })
  t.pass(`spread after the restart: ${JSON.stringify(spread)}`)

  for (const nodeId of ['node-a', 'node-b']) t.equal(await cluster.stop(nodeId), 0, `${nodeId} stopped`)
  const runs = await cluster.ledger()
  t.ok(runs.length > runsBefore, `${runs.length} runs, ${runsBefore} of them before the restart: the ledger kept them`)
  const overlaps = await overlappingRuns(cluster)
  if (overlaps.length > 0) {
    const { rows } = await cluster.sql.query('select * from cluster_ledger where run_id = any($1) order by started_at', [overlaps.flatMap((o) => [o.a, o.b])])
    t.comment(`overlapping runs: ${JSON.stringify(rows)}; process exits: ${JSON.stringify(cluster.exits())}`)
  }
  t.same(overlaps, [], 'no two runs of one reaktor overlap across the restart')
  t.same(runs.filter((r) => !r.lock_held && r.outcome !== 'run aborted: lock connection lost').map((r) => r.run_id), [],
    'every run started under its lock (or began as the lock was lost and was fenced at once)')
  t.comment(`measured: ${JSON.stringify({ downMs: upAt - downAt, resumeMs, runs: runs.length })}`)
})
