/**
 * SIGTERM of a node whose run ignores its signal, with real processes (docs/operating.md, "Health, metrics, logs and shutdown": SIGTERM
 * and SHUTDOWN_GRACE). After the grace period the node must not give up the lock of that run's
 * partition while the run may still be going: another node would start the same reaktor next to
 * it. It keeps that lock until the process exits, and releases the others at the grace.
 *
 * The owner is kept alive past its grace by an HTTP request in flight (shutdown lets in-flight
 * requests finish), as in production; the test ends that request after a window longer than
 * SHUTDOWN_GRACE plus a takeover, and watches the ledger all along.
 */
import t from 'tap'
import net from 'node:net'
import { ADMIN } from '../helpers/auth.js'
import { bound, deadline, margin, waitFor } from '../helpers/timing.js'
import { createTestDatabase } from '../helpers/database.js'
import { BUSY, Cluster, ms, overlappingRuns, some } from '../helpers/cluster.js'

const GRACE_MS = 3000
/** docs/cluster.md: a free partition is taken at the next pass (every second) or at once when announced. */
const TAKEOVER_MS = bound(1000, 'seconds')
/** The manual reaktor's runs work this long, whatever their signal says: far longer than the test. */
const STUCK_WORK_MS = 600_000

/**
 * A POST whose body the test sends when it wants: the node's HTTP drain waits for it. Resolves
 * once the node has parsed the headers (it answered `100 Continue`), so the request is in flight.
 */
async function heldRequest (url: string, token: string): Promise<{ finish: () => Promise<string> }> {
  const { hostname, port } = new URL(url)
  const socket = net.connect({ host: hostname, port: Number(port) })
  let received = ''
  socket.setEncoding('utf8')
  socket.on('data', (chunk: string) => { received += chunk })
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()))
  socket.on('error', () => {})
  await new Promise<void>((resolve, reject) => { socket.once('connect', resolve); socket.once('error', reject) })
  socket.write(['POST /api/v1/aktor/no-such-aktor HTTP/1.1', `Host: ${hostname}:${port}`, `X-Service-Token: ${token}`,
    'Content-Type: application/json', 'Content-Length: 2', 'Expect: 100-continue', 'Connection: close', '', ''].join('\r\n'))
  await waitFor(() => /^HTTP\/1\.1 100 /.test(received), { timeoutMs: deadline(5000), what: 'the node to accept the held request' })
  return {
    finish: async () => {
      socket.write('{}')
      await closed
      return received
    }
  }
}

t.test('SIGTERM of a node whose run ignores its signal: its partition stays locked until the process exits, no overlap', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const cluster = new Cluster(t, databaseUrl, {
    SHUTDOWN_GRACE: `${GRACE_MS / 1000}s`,
    REAKTOR_SETTING_CLUSTER_LEDGER_MANUALWORKMS: String(STUCK_WORK_MS),
    REAKTOR_SETTING_CLUSTER_LEDGER_MANUALIGNORESSIGNAL: 'true'
  })
  await Promise.all([cluster.start('node-a'), cluster.start('node-b')])
  t.equal((await cluster.api('node-a', 'POST', '/polling/manual/start')).status, 200, 'manual started')
  const owner = (await waitFor(async () => (await cluster.lockHolders(['manual'])).get('manual'), { timeoutMs: deadline(15_000), what: 'an owner of manual' }))
  const other = owner === 'node-a' ? 'node-b' : 'node-a'
  const [stuck] = await waitFor(async () => some(await cluster.ledger("reaktor_id = 'manual' and node_id = $1 and ended_at is null", [owner])),
    { timeoutMs: deadline(15_000), what: `a run of manual in flight on ${owner}` })
  // The owner runs some busy reaktors too: those partitions must be handed over at the grace.
  const ownersBusy = await waitFor(async () => {
    const busy = [...await cluster.lockHolders(BUSY)].filter(([, n]) => n === owner).map(([id]) => id)
    return busy.length > 0 ? busy : undefined
  }, { timeoutMs: deadline(15_000), intervalMs: 200, what: `${owner} to own a busy reaktor` })

  const login = await fetch(`${cluster.node(owner).url}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN) })
  const held = await heldRequest(cluster.node(owner).url, (await login.json() as { token: string }).token)
  const ownerNode = cluster.node(owner)
  const termAt = Date.now()
  ownerNode.child.kill('SIGTERM')
  cluster.nodes.delete(owner)
  t.comment(`SIGTERM to ${owner}, whose run ${stuck.run_id} of manual ignores its signal`)

  // The window: the grace, then a takeover's time. The owner lives on (its HTTP drain) meanwhile.
  const elsewhere: string[] = []
  let busyTaken: string[] = []
  await waitFor(async () => {
    const runs = await cluster.ledger('node_id = $1 and started_at > $2', [other, new Date(termAt)])
    for (const r of runs) if (r.reaktor_id === 'manual' && !elsewhere.includes(r.run_id)) elsewhere.push(r.run_id)
    busyTaken = [...new Set(runs.filter((r) => ownersBusy.includes(r.reaktor_id)).map((r) => r.reaktor_id))]
    return Date.now() - termAt >= GRACE_MS + TAKEOVER_MS
  }, { timeoutMs: GRACE_MS + TAKEOVER_MS + deadline(10_000), intervalMs: 100, what: 'the window after the grace' })
  t.equal(ownerNode.child.exitCode, null, `${owner} still runs ${Date.now() - termAt} ms after SIGTERM (its HTTP drain)`)
  t.match(ownerNode.output(), /runs still in flight after the shutdown grace period/, 'it said so at the grace')
  t.same(elsewhere, [], `no run of manual started on ${other} while ${owner} (still alive) had it in flight`)
  t.same(busyTaken.sort(), [...ownersBusy].sort(), `${other} took ${owner}'s other reaktors at the grace (${ownersBusy.join(', ')})`)

  const answer = await held.finish()
  t.match(answer, /HTTP\/1\.1 404 /, 'the held request was answered during the shutdown')
  t.equal(await ownerNode.exited, 0, `${owner} exited cleanly`)
  const exitedAt = ownerNode.exitedAt!
  t.equal((await cluster.ledger('run_id = $1', [stuck.run_id]))[0].ended_at, null, 'the stuck run never ended: it went with the process')

  const [takeover] = await waitFor(async () => some(await cluster.ledger("reaktor_id = 'manual' and node_id = $1", [other])),
    { timeoutMs: TAKEOVER_MS + deadline(5000), intervalMs: 50, what: `${other} to run manual` })
  // The test sees the exit a few turns late on a busy machine.
  t.ok(ms(takeover.started_at) >= exitedAt - margin('turns'), `${other} ran manual ${ms(takeover.started_at) - exitedAt} ms after ${owner} exited (clocks of one machine)`)
  t.ok(ms(takeover.started_at) - exitedAt <= TAKEOVER_MS, `within ${TAKEOVER_MS} ms`)
  t.ok(takeover.lock_held, 'holding its lock')
  const runs = await cluster.ledger()
  t.same(await overlappingRuns(cluster), [], `no two runs of one reaktor overlap (${runs.length} runs)`)
  t.comment(`measured: ${JSON.stringify({ graceMs: GRACE_MS, ownerExitedAfterTermMs: exitedAt - termAt, takeoverAfterExitMs: ms(takeover.started_at) - exitedAt })}`)
})
