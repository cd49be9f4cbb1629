/**
 * A network cut between ONE node and PostgreSQL (docs/cluster.md, "How the nodes coordinate" →
 * "Network cut"), with real processes. The ledger app writes every run straight to the database
 * over a path that is never cut, so the cut node's runs stay visible to the test.
 *
 * Two ways to cut, and the output says which ran:
 * - **network namespace** (as root, with `ip` and `nft`): the test runs its own PostgreSQL, listening
 *   also on the host end of a veth pair, and node-a inside a namespace of its own at the other end.
 *   The cut is an nft table in that namespace dropping every packet to and from the database's
 *   address, both ways: both kernels see real silence, so PostgreSQL's keepalive and
 *   `tcp_user_timeout` must end node-a's session by themselves, and the takeover time is real.
 * - **proxy** (anywhere else, or with REAKTOR_TEST_NETWORK_CUT=proxy): node-a reaches the database through a small TCP proxy that stops
 *   forwarding in both directions without closing anything. The proxy's own kernel keeps
 *   acknowledging the server's probes, so PostgreSQL never sees silence on loopback: the test keeps
 *   the cut for the documented server-side bound (25 s) and then plays the server's part, resetting
 *   the proxy's connection for node-a's lock session only.
 *
 * Either way node-b then takes node-a's reaktors over while node-a is still cut off; finally the
 * network heals, and node-a reconnects by itself and takes its share again.
 */
import t from 'tap'
import net from 'node:net'
import { bound, deadline, margin, waitFor } from '../helpers/timing.js'
import { createTestDatabase } from '../helpers/database.js'
import { ALL_REAKTORS, BUSY, Cluster, firstRuns, ms, overlappingRuns, some } from '../helpers/cluster.js'
import fs from 'node:fs/promises'
import path from 'node:path'
import pg from 'pg'
import { createNetns, netnsUnavailable } from '../helpers/netns.js'
import { ownPostgres } from '../helpers/own-postgres.js'
import type { TestContext } from '../helpers/test-context.js'
import type { Test } from 'tap'

/** docs/cluster.md: pinged every 1 s, a statement unanswered for 5 s is a lost connection: fenced within about 6 s. */
const FENCE_BOUND_MS = bound(6000, 'second')
/** docs/cluster.md: a run starts without a fresh ping when the lock connection answered within 2 s. */
const LOCK_CHECK_MAX_AGE_MS = 2000
/** docs/cluster.md: PostgreSQL drops a silent lock session only after at least 25 s of silence (keepalives, tcp_user_timeout). */
const SERVER_DROP_AFTER_MS = 25_000
/** Silence starts at the session's last packet, up to one ping period (1 s) before the cut. */
const PING_PERIOD_MS = 1000
/** How late the server's own drop may come: after its last keepalive probe and retransmission timers. */
const SERVER_DROP_BOUND_MS = bound(SERVER_DROP_AFTER_MS, 'keepalive')
/** Timestamps of the ledger (node clocks) against the test's clock and log times: same machine, event-loop slack. */
const SLACK_MS = margin('turns')

interface Pair { down: net.Socket, up: net.Socket | undefined }

/**
 * A TCP relay on 127.0.0.1 that can be cut: while cut, it forwards nothing in either direction,
 * opens no new upstream connection and passes on no end or close; all of that is replayed, in
 * order, when the cut heals. `dropUpstream` plays PostgreSQL's side of a failed keepalive.
 */
class CutProxy {
  private readonly server: net.Server
  private readonly pairs = new Set<Pair>()
  private deferred: Array<() => void> = []
  private isCut = false

  constructor (private readonly host: string, private readonly port: number) {
    this.server = net.createServer({ allowHalfOpen: true, pauseOnConnect: true }, (down) => this.accept(down))
  }

  async listen (): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject)
      this.server.listen(0, '127.0.0.1', resolve)
    })
    return (this.server.address() as net.AddressInfo).port
  }

  private act (fn: () => void): void {
    if (this.isCut) this.deferred.push(fn)
    else fn()
  }

  private accept (down: net.Socket): void {
    down.on('error', () => {})
    const pair: Pair = { down, up: undefined }
    this.pairs.add(pair)
    // During a cut a new connection does not reach the server either (as if its SYN were lost).
    this.act(() => {
      const up = net.connect({ host: this.host, port: this.port, allowHalfOpen: true })
      up.on('error', () => {})
      pair.up = up
      this.relay(down, up)
      this.relay(up, down)
      down.on('close', () => { if (up.destroyed) this.pairs.delete(pair) })
      up.on('close', () => { if (down.destroyed) this.pairs.delete(pair) })
      down.resume()
    })
  }

  private relay (from: net.Socket, to: net.Socket): void {
    from.on('data', (chunk: Buffer) => this.act(() => { if (!to.destroyed) to.write(chunk) }))
    from.on('end', () => this.act(() => { if (!to.destroyed) to.end() }))
    from.on('close', (hadError: boolean) => this.act(() => { if (hadError) to.destroy(); else if (!to.destroyed) to.end() }))
  }

  /** Stops all forwarding; nothing is closed, so neither side sees a FIN or an RST. */
  cut (): void {
    this.isCut = true
    for (const { down, up } of this.pairs) {
      down.pause()
      up?.pause()
    }
  }

  /** Forwards what waited, in order, then everything again. */
  heal (): void {
    this.isCut = false
    const waiting = this.deferred
    this.deferred = []
    for (const fn of waiting) fn()
    for (const { down, up } of this.pairs) {
      if (up === undefined) continue
      down.resume()
      up.resume()
    }
  }

  /**
   * PostgreSQL's part of a failed keepalive: the server side of one connection (the proxy's
   * upstream socket whose local port PostgreSQL shows as `client_port`) is reset, so the server
   * ends that session and releases its locks. The client side learns nothing while the cut lasts.
   */
  dropUpstream (localPort: number): boolean {
    for (const { up } of this.pairs) {
      if (up !== undefined && up.localPort === localPort) {
        up.resetAndDestroy()
        return true
      }
    }
    return false
  }

  async close (): Promise<void> {
    this.isCut = false
    this.deferred = []
    for (const { down, up } of this.pairs) {
      down.destroy()
      up?.destroy()
    }
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}

/** The `time` (epoch ms) of the first JSON log line of `output` whose msg matches. */
function logTime (output: string, msg: RegExp): number | undefined {
  for (const line of output.split('\n')) {
    if (!msg.test(line)) continue
    try {
      const time = (JSON.parse(line) as { time?: unknown }).time
      if (typeof time === 'number') return time
    } catch {
      // not a JSON log line (a stack trace, pino-pretty): skipped
    }
  }
  return undefined
}

/** One way to cut node-a off: how node-a is started, the cut, the heal, and the server's drop of the silent session. */
interface Partition {
  variant: string
  databaseUrl: string
  nodeA: { env: Record<string, string>, netns?: string }
  cut: () => Promise<void>
  heal: () => Promise<void>
  /**
   * Resolves when PostgreSQL has ended node-a's silent lock session, with the time it was seen
   * gone; `watch` runs meanwhile (every 250 ms) to prove that the locks stayed with that session.
   */
  serverDrop: (cluster: Cluster, lockPid: number, cutAt: number, watch: () => Promise<void>) => Promise<number>
}

async function sessionGone (cluster: Cluster, pid: number): Promise<boolean> {
  return (await cluster.sql.query('select 1 from pg_stat_activity where pid = $1', [pid])).rowCount === 0
}

/** Real packet drops: node-a in a namespace of its own, PostgreSQL on the host end of its veth pair. */
async function namespacePartition (t: TestContext): Promise<Partition> {
  const ns = await createNetns(t)
  const server = await ownPostgres(t, { extraListenAddresses: ns.hostAddresses })
  await fs.appendFile(path.join(server.dataDir, 'postgres', 'pg_hba.conf'), `host all all ${ns.subnet} scram-sha-256\n`)
  const client = new pg.Client({ connectionString: server.adminUrl })
  await client.connect()
  await client.query('select pg_reload_conf()')
  await client.end()
  const via = (host: string): string => {
    const url = new URL(server.url)
    url.hostname = host
    return url.toString()
  }
  let heal: (() => Promise<void>) | undefined
  return {
    variant: `network namespace ${ns.name} (veth ${ns.nsAddress} -> ${ns.hostAddresses[0]}, nft drops both ways)`,
    databaseUrl: server.url,
    // Its ledger writes take the second host address, which is never cut.
    nodeA: { env: { DATABASE_URL: via(ns.hostAddresses[0]), REAKTOR_SETTING_CLUSTER_LEDGER_LEDGERURL: via(ns.hostAddresses[1]) }, netns: ns.name },
    cut: async () => { heal = await ns.cut(ns.hostAddresses[0]) },
    heal: async () => { await heal?.() },
    serverDrop: async (cluster, lockPid, cutAt, watch) => await waitFor(async () => {
      await watch()
      return await sessionGone(cluster, lockPid) ? Date.now() : undefined
    }, { timeoutMs: SERVER_DROP_BOUND_MS + deadline(5000) - (Date.now() - cutAt), intervalMs: 250, what: 'PostgreSQL to drop the silent lock session' })
  }
}

/** The stand-in: node-a through a proxy that stops forwarding; the server's drop is played at 25 s. */
async function proxyPartition (t: Test, reason: string): Promise<Partition> {
  const databaseUrl = await createTestDatabase(t)
  const target = new URL(databaseUrl)
  const proxy = new CutProxy(target.hostname, Number(target.port))
  const viaProxy = new URL(databaseUrl)
  viaProxy.port = String(await proxy.listen())
  t.teardown(async () => await proxy.close())
  return {
    variant: `proxy (no network namespace: ${reason}); the server's drop is played at ${SERVER_DROP_AFTER_MS} ms`,
    databaseUrl,
    nodeA: { env: { DATABASE_URL: viaProxy.toString() } },
    cut: async () => proxy.cut(),
    heal: async () => proxy.heal(),
    serverDrop: async (cluster, lockPid, cutAt, watch) => {
      await waitFor(async () => {
        await watch()
        return Date.now() - cutAt >= SERVER_DROP_AFTER_MS
      }, { timeoutMs: SERVER_DROP_AFTER_MS + deadline(5000), intervalMs: 250, what: 'the server-side keepalive window' })
      t.equal(await cluster.lockConnectionPid('node-a'), lockPid, "the silent lock session is still there: PostgreSQL has not noticed the cut (loopback, proxy's kernel acks)")
      const { rows: [session] } = await cluster.sql.query<{ client_port: number }>('select client_port from pg_stat_activity where pid = $1', [lockPid])
      const droppedAt = Date.now()
      t.ok(proxy.dropUpstream(session.client_port), "the server side of node-a's lock session is reset")
      await waitFor(async () => await sessionGone(cluster, lockPid), { timeoutMs: deadline(5000), intervalMs: 20, what: 'PostgreSQL to end the silent session' })
      return droppedAt
    }
  }
}

// REAKTOR_TEST_NETWORK_CUT=proxy runs the stand-in where a namespace could be made, to keep it honest.
const unavailable = process.env.REAKTOR_TEST_NETWORK_CUT === 'proxy' ? 'REAKTOR_TEST_NETWORK_CUT=proxy' : await netnsUnavailable()

t.test(`network cut of one node (${unavailable === false ? 'network namespace' : 'proxy'}): it fences itself within about 6 s, nothing overlaps, the reaktors run again`, async (t) => {
  const partition = unavailable === false ? await namespacePartition(t) : await proxyPartition(t, unavailable)
  t.comment(`cut by: ${partition.variant}`)
  const cluster = new Cluster(t, partition.databaseUrl)
  const figures: Record<string, unknown> = { variant: unavailable === false ? 'netns' : 'proxy' }

  const [nodeA] = await Promise.all([cluster.start('node-a', partition.nodeA.env, { netns: partition.nodeA.netns }), cluster.start('node-b')])
  const running = ALL_REAKTORS.filter((id) => id !== 'manual') // autoStart; manual stays stopped
  const before = await waitFor(async () => {
    const holders = await cluster.lockHolders()
    const a = [...holders].filter(([, n]) => n === 'node-a').map(([id]) => id)
    const ok = holders.size === running.length && a.length >= 1 && a.length <= Math.ceil(running.length / 2) &&
      a.some((id) => BUSY.includes(id))
    return ok ? holders : undefined
  }, { timeoutMs: deadline(15_000), intervalMs: 200, what: 'the reaktors spread over both nodes' })
  const victims = [...before].filter(([, n]) => n === 'node-a').map(([id]) => id).sort()
  const victimsBusy = victims.filter((id) => BUSY.includes(id))
  // node-a is really running its busy reaktors (back to back) when the cut comes.
  await waitFor(async () => (await cluster.ledger("node_id = 'node-a' and reaktor_id = any($1) and started_at > now() - interval '300 ms'",
    [victimsBusy])).length > 0, { timeoutMs: deadline(10_000), intervalMs: 50, what: 'node-a to run its busy reaktors' })
  const lockPid = (await cluster.lockConnectionPid('node-a'))!
  const logOffset = nodeA.output().length

  // ---- the cut
  const cutAt = Date.now()
  await partition.cut()
  t.comment(`cut node-a off; it owned ${victims.join(', ')}`)

  const fencedAt = await waitFor(() => logTime(nodeA.output().slice(logOffset), /all runs aborted \(fencing\)/),
    { timeoutMs: FENCE_BOUND_MS + deadline(3000), intervalMs: 50, what: 'node-a to fence itself' })
  figures.fenceMs = fencedAt - cutAt
  t.ok(fencedAt - cutAt <= FENCE_BOUND_MS, `node-a fenced itself ${fencedAt - cutAt} ms after the cut (bound ${FENCE_BOUND_MS} ms)`)

  // The runs node-a started are all over by the fencing; their ends are written straight to the ledger.
  const since = new Date(nodeA.startedAt)
  const runsA = await waitFor(async () => {
    const runs = await cluster.ledger("node_id = 'node-a' and started_at >= $1", [since])
    return runs.every((r) => r.ended_at !== null) ? runs : undefined
  }, { timeoutMs: deadline(5000), intervalMs: 50, what: "the ends of node-a's runs" })
  const lastStart = Math.max(...runsA.map((r) => ms(r.started_at)))
  const lastEnd = Math.max(...runsA.map((r) => ms(r.ended_at)))
  figures.lastStartAfterCutMs = lastStart - cutAt
  figures.lastEndAfterCutMs = lastEnd - cutAt
  t.ok(lastEnd <= fencedAt + SLACK_MS, `node-a's last run ended ${lastEnd - cutAt} ms after the cut, ${fencedAt - lastEnd} ms before the fencing`)
  t.ok(lastStart <= cutAt + LOCK_CHECK_MAX_AGE_MS + SLACK_MS,
    `node-a's last run started ${lastStart - cutAt} ms after the cut: none once its lock connection was ${LOCK_CHECK_MAX_AGE_MS} ms silent`)
  const abortedA = runsA.filter((r) => r.outcome !== 'ok')
  t.ok(abortedA.every((r) => r.outcome === 'run aborted: lock connection lost'),
    `runs aborted on node-a: ${abortedA.map((r) => `${r.reaktor_id}: ${String(r.outcome)}`).join('; ') || 'none (nothing was in flight)'}`)

  // ---- PostgreSQL keeps the silent session, and its locks, until it notices the silence.
  let checks = 0
  const lost: string[] = []
  const droppedAt = await partition.serverDrop(cluster, lockPid, cutAt, async () => {
    const holders = await cluster.lockHolders()
    checks++
    const gone = victims.filter((id) => holders.get(id) !== 'node-a')
    // Gone with the session itself is the drop, not a loss.
    if (gone.length > 0 && !(await sessionGone(cluster, lockPid))) lost.push(`${Date.now() - cutAt} ms: ${gone.join(', ')}`)
  })
  figures.serverDropAfterCutMs = droppedAt - cutAt
  t.same(lost, [], `until PostgreSQL dropped it ${droppedAt - cutAt} ms after the cut, the silent session kept every lock of node-a (${checks} checks)`)
  t.ok(droppedAt - cutAt >= SERVER_DROP_AFTER_MS - PING_PERIOD_MS - SLACK_MS,
    `PostgreSQL dropped the session no earlier than the documented ${SERVER_DROP_AFTER_MS} ms of silence (its last packet came up to ${PING_PERIOD_MS} ms before the cut)`)
  t.ok(droppedAt - cutAt <= SERVER_DROP_BOUND_MS, `and within ${SERVER_DROP_AFTER_MS} + ${SERVER_DROP_BOUND_MS - SERVER_DROP_AFTER_MS} ms`)
  t.ok(droppedAt - fencedAt >= SERVER_DROP_AFTER_MS - FENCE_BOUND_MS - PING_PERIOD_MS, `node-a had fenced itself ${droppedAt - fencedAt} ms before its locks could move`)
  t.same((await cluster.ledger('reaktor_id = any($1) and started_at > $2', [victims, new Date(cutAt)]))
    .filter((r) => ms(r.started_at) > fencedAt && ms(r.started_at) < droppedAt).map((r) => `${r.reaktor_id}@${r.node_id}`), [],
  "no run of node-a's reaktors started anywhere between the fencing and the server's drop")

  // ---- node-b takes over, node-a still cut.
  const firsts = await waitFor(async () => {
    const first = firstRuns(await cluster.ledger("node_id = 'node-b' and reaktor_id = any($1) and started_at > $2", [victims, new Date(droppedAt)]))
    return first.size === victims.length ? first : undefined
  }, { timeoutMs: deadline(10_000), intervalMs: 50, what: "node-b to run node-a's reaktors" })
  const takeover = Math.max(...[...firsts.values()].map((r) => ms(r.started_at) - droppedAt))
  figures.takeoverAfterDropMs = takeover
  figures.takeoverAfterCutMs = takeover + droppedAt - cutAt
  // docs/cluster.md: the others take a free partition at their next pass, every second (its first
  // runs then wait the 200 ms fencing grace, inside the margin).
  t.ok(takeover < bound(1000, 'seconds'), `node-b ran all of ${victims.join(', ')} ${takeover} ms after the session was dropped (${takeover + droppedAt - cutAt} ms after the cut)`)
  t.ok([...firsts.values()].every((r) => r.lock_held), 'node-b held their locks when it ran them')
  // Watch one reconcile period more: node-a, still cut off, starts nothing.
  const watchUntil = Date.now() + 1500
  await waitFor(() => Date.now() >= watchUntil, { timeoutMs: deadline(5000), intervalMs: 100, what: 'one more reconcile period' })
  t.same((await cluster.ledger("node_id = 'node-a' and started_at > $1", [new Date(fencedAt)])).map((r) => r.reaktor_id), [],
    'node-a started no run while cut off')
  t.match(nodeA.output().slice(logOffset), /reconnect failed/, 'node-a kept trying to reconnect (and failed) while cut off')

  // ---- The network heals: node-a reconnects by itself and takes its share again.
  const healedAt = Date.now()
  await partition.heal()
  await waitFor(() => /lock connection re-established/.test(nodeA.output().slice(logOffset)),
    { timeoutMs: deadline(15_000), intervalMs: 50, what: 'node-a to reconnect' })
  const back = await waitFor(async () => some(await cluster.ledger("node_id = 'node-a' and started_at > $1", [new Date(healedAt)])),
    { timeoutMs: deadline(15_000), intervalMs: 100, what: 'node-a to run reaktors again' })
  figures.rejoinAfterHealMs = ms(back[0].started_at) - healedAt
  t.pass(`node-a ran ${back[0].reaktor_id} again ${ms(back[0].started_at) - healedAt} ms after the network healed`)

  for (const nodeId of ['node-a', 'node-b']) t.equal(await cluster.stop(nodeId), 0, `${nodeId} stopped`)
  const runs = await cluster.ledger()
  t.same(await overlappingRuns(cluster), [], `no two runs of one reaktor overlap (${runs.length} runs)`)
  t.same(runs.filter((r) => !r.lock_held && r.outcome !== 'run aborted: lock connection lost').map((r) => `${r.reaktor_id}@${r.node_id}`), [],
    'every run started on a node whose lock session held its lock')
  t.comment(`measured: ${JSON.stringify(figures)}`)
})
