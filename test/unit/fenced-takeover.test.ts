import net from 'node:net'
import { performance } from 'node:perf_hooks'
import t from 'tap'
import pg from 'pg'
import { deadline, waitFor } from '../helpers/timing.js'
import { memoryLogger } from '../helpers/log.js'
import { endSessionAndWakeNodes, openTestDatabase, registry, scheduler, work } from '../helpers/scheduler.js'
import type { PollingReaktorRegistration } from '../../src/sdk/types.js'

/**
 * PostgreSQL frees a node's partition locks the moment it ends the node's lock session; the node
 * hears of it only when its socket reports the end, and aborts its runs then (1–21 ms later when
 * measured, longer on busy cores). A node taking such a partition over in between must not start
 * its reaktors beside the runs the previous holder has not aborted yet.
 *
 * Here node-a's lock connection goes through a proxy that hands on what PostgreSQL sends (the
 * termination's error and the end of the socket too) LATE_MS late: node-a hears of the ended
 * session LATE_MS after PostgreSQL freed its locks. node-b passes at once (a partition is
 * announced free right after the session ended), so before the fencing grace it started the
 * reaktor within a few ms, beside node-a's run.
 */

/** How late node-a hears of its ended session: within the fencing grace (200 ms), far beyond node-b's takeover (a few ms). */
const LATE_MS = 60

/** A TCP proxy to PostgreSQL whose server-to-client direction can be made late (order kept). */
class LateProxy {
  lateMs = 0
  private readonly server: net.Server
  private readonly sockets = new Set<net.Socket>()

  constructor (private readonly host: string, private readonly port: number) {
    this.server = net.createServer((down) => {
      const up = net.connect(this.port, this.host)
      for (const s of [down, up]) {
        this.sockets.add(s)
        s.on('close', () => this.sockets.delete(s))
        s.on('error', () => {})
      }
      down.pipe(up)
      down.on('close', () => up.destroy())
      // Everything PostgreSQL sends, its end included, arrives lateMs late (timers of equal delay keep their order).
      const later = (fn: () => void): void => { if (this.lateMs === 0) fn(); else setTimeout(fn, this.lateMs) }
      up.on('data', (chunk: Buffer) => later(() => down.write(chunk)))
      up.on('close', () => later(() => down.destroy()))
    })
  }

  async listen (): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve))
    return (this.server.address() as net.AddressInfo).port
  }

  async close (): Promise<void> {
    for (const s of this.sockets) s.destroy()
    await new Promise((resolve) => this.server.close(resolve))
  }
}

interface Run { node: string, start: number, end?: number, aborted?: string }

/** A back-to-back reaktor whose runs last until their signal aborts (at once), recorded in `runs` with their node. */
function busyReaktor (node: string, runs: Run[]): PollingReaktorRegistration {
  return {
    reaktorDefinitionId: 'busy',
    interval: '1s',
    autoStart: true,
    createReaktor: () => async (_input, context) => {
      const run: Run = { node, start: performance.now() }
      runs.push(run)
      await work(60_000, context.signal)
      run.end = performance.now()
      if (context.signal.aborted) run.aborted = String((context.signal.reason as Error)?.message)
      return true
    }
  }
}

t.test('a partition taken over from an ended lock session: no run starts beside the run its previous holder has not aborted yet', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const target = new URL(url)
  const proxy = new LateProxy(target.hostname, Number(target.port))
  const viaProxy = new URL(url)
  viaProxy.port = String(await proxy.listen())
  t.teardown(async () => await proxy.close())

  const runs: Run[] = []
  const busy = (node: string): PollingReaktorRegistration => busyReaktor(node, runs)
  const logA = memoryLogger()
  const a = scheduler(t, db, viaProxy.toString(), { nodeId: 'node-a', reaktors: registry([busy('node-a')]), log: logA })
  await a.start()
  await waitFor(() => runs.some((r) => r.node === 'node-a' && r.end === undefined), { what: 'a run in flight on node-a' })
  const b = scheduler(t, db, url, { nodeId: 'node-b', reaktors: registry([busy('node-b')]) })
  await b.start()
  // node-b has joined and looked: node-a keeps the reaktor (one reaktor, two nodes: a's share).
  await waitFor(() => b.ownershipShare.members === 2, { what: 'node-b to see both nodes' })
  t.equal(b.ownedCount, 0, 'node-b owns nothing while node-a holds the partition')

  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  t.teardown(async () => await admin.end())
  proxy.lateMs = LATE_MS
  const lockPid = a.lockConnectionPid!
  await endSessionAndWakeNodes(admin, lockPid)
  const freedAt = performance.now()

  const first = await waitFor(() => runs.find((r) => r.node === 'node-b'), { timeoutMs: deadline(5000), what: 'node-b to run the reaktor' })
  const fenced = await waitFor(() => runs.find((r) => r.node === 'node-a' && r.aborted !== undefined), { timeoutMs: deadline(5000), what: 'node-a to fence its run' })
  t.equal(fenced.aborted, 'run aborted: lock connection lost', 'node-a fenced its run')
  t.ok(fenced.end! - freedAt >= LATE_MS / 2, `node-a heard of its ended session late: its run ended ${Math.round(fenced.end! - freedAt)} ms after the session ended`)
  t.ok(first.start >= fenced.end!,
    `node-b's first run started ${Math.round(first.start - freedAt)} ms after the session ended, node-a's run ended ${Math.round(fenced.end! - freedAt)} ms after it: no overlap`)
  // The takeover still comes at once after the grace: node-b's pass began right after the session ended.
  t.ok(first.start - freedAt <= deadline(1000), `node-b took over ${Math.round(first.start - freedAt)} ms after the session ended`)
  const overlapping = runs.filter((x) => runs.some((y) => y !== x && y.start < x.start && (y.end === undefined || y.end > x.start)))
  t.same(overlapping.map((r) => `${r.node} at ${Math.round(r.start - freedAt)} ms`), [], 'no two runs of the reaktor overlapped')
})

t.test('a partition released by its holder (a shutdown) is run by the next holder at once, without the fencing grace', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const runs: Run[] = []
  const busy = (node: string): PollingReaktorRegistration => busyReaktor(node, runs)
  const a = scheduler(t, db, url, { nodeId: 'node-a', reaktors: registry([busy('node-a')]) })
  await a.start()
  await waitFor(() => runs.some((r) => r.node === 'node-a' && r.end === undefined), { what: 'a run in flight on node-a' })
  // A grace this long would show: the release is announced after node-a's runs settled, so none applies.
  const graceMs = 5000
  const b = scheduler(t, db, url, { nodeId: 'node-b', reaktors: registry([busy('node-b')]), fencingGraceMs: graceMs })
  await b.start()
  await waitFor(() => b.ownershipShare.members === 2, { what: 'node-b to see both nodes' })
  await a.stop()
  const releasedAt = performance.now()
  const first = await waitFor(() => runs.find((r) => r.node === 'node-b'), { timeoutMs: graceMs + deadline(5000), what: 'node-b to run the reaktor' })
  const last = runs.find((r) => r.node === 'node-a')!
  t.ok(last.end !== undefined && first.start >= last.end, 'node-b started after node-a\'s run had ended')
  t.ok(first.start - releasedAt < graceMs, `node-b ran the reaktor ${Math.round(first.start - releasedAt)} ms after node-a released it (the grace would be ${graceMs} ms)`)
})
