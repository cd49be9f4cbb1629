import t, { type Test } from 'tap'
import pg from 'pg'
import { deadline, waitFor } from '../helpers/timing.js'
import { memoryLogger } from '../helpers/log.js'
import { openTestDatabase, registry, scheduler } from '../helpers/scheduler.js'

/**
 * A node whose event loop stalls (a long GC pause, a paused process) while PostgreSQL ends its
 * lock session: when the loop runs again, its overdue timers fire before it has read the closed
 * socket. A run due in that moment must not start on what the node knew before the stall (its
 * lock connection answered less than 2 s ago): the partition may belong to another node by now.
 */

/** Shorter than the 2 s within which a run starts without a fresh ping, longer than a takeover can take. */
const STALL_MS = 1000

interface Start { at: number, lockPid: number | undefined }

/** Keeps the loop busy for `ms` (the load of one turn). */
function busyFor (ms: number): void {
  const until = Date.now() + ms
  while (Date.now() < until) { /* the load */ }
}

/**
 * A node whose reaktors (one per interval, in ms; each run returns at once) record when each run
 * started and on which lock session; and an admin connection to end that session with.
 */
async function recordingNode (t: Test, intervalsMs: number[], runsFirst: number, what: string): Promise<{ s: ReturnType<typeof scheduler>, log: ReturnType<typeof memoryLogger>, starts: Start[], admin: pg.Client, lockPid: number }> {
  const { url, db } = await openTestDatabase(t)
  const starts: Start[] = []
  let s: ReturnType<typeof scheduler> | undefined = undefined
  const reaktors = intervalsMs.map((ms, i) => ({
    reaktorDefinitionId: intervalsMs.length === 1 ? 'timed' : `late-${i}`,
    interval: `${ms}ms`,
    autoStart: true,
    createReaktor: () => () => { starts.push({ at: Date.now(), lockPid: s?.lockConnectionPid }); return false }
  }))
  const log = memoryLogger()
  s = scheduler(t, db, url, { reaktors: registry(reaktors), log, reconnectMinMs: 200 })
  await s.start()
  await waitFor(() => starts.length >= runsFirst, { what })
  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  t.teardown(async () => await admin.end())
  return { s, log, starts, admin, lockPid: s.lockConnectionPid! }
}

/** Stalls the loop for STALL_MS; the termination is sent before it (a client's write goes out at once) and PostgreSQL ends the session during it. */
function endSessionDuringStall (admin: pg.Client, lockPid: number): { terminated: Promise<pg.QueryResult<{ ok: boolean }>>, stallStart: number, stallEnd: number } {
  const terminated = admin.query<{ ok: boolean }>('select pg_terminate_backend($1) as ok', [lockPid])
  const stallStart = Date.now()
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, STALL_MS)
  return { terminated, stallStart, stallEnd: Date.now() }
}

/** After the stall: the node fences itself and runs again on a new session, and no run started on the ended one from `from` on. */
async function noRunOnEndedSession (t: Test, node: Awaited<ReturnType<typeof recordingNode>>, stall: ReturnType<typeof endSessionDuringStall>, from: number): Promise<void> {
  const { s, log, starts, lockPid } = node
  const { stallStart, stallEnd } = stall
  t.ok((await stall.terminated).rows[0].ok, 'the lock session was terminated during the stall')
  await waitFor(() => log.lines.some((l) => /lock connection lost/.test(l.msg ?? '')), { timeoutMs: deadline(5000), what: 'the node to fence itself' })
  await waitFor(() => s.lockConnectionPid !== undefined && s.lockConnectionPid !== lockPid && starts.some((r) => r.at > stallEnd && r.lockPid === s.lockConnectionPid),
    { timeoutMs: deadline(10_000), what: 'runs again on a new lock session' })
  const stale = starts.filter((r) => r.at >= from && r.lockPid === lockPid)
  t.same(stale.map((r) => `${r.at - stallEnd} ms after the stall`), [], 'no run started on the ended session after the stall')
  t.ok(stallEnd - stallStart >= STALL_MS, `the loop stalled for ${stallEnd - stallStart} ms`)
}

t.test('after a stall during which its lock session ended, the node starts no run before it has read the lost session', async (t) => {
  // Runs return at once: between two runs the runner's interval timer is always pending.
  const node = await recordingNode(t, [100], 3, 'a few runs')
  const stall = endSessionDuringStall(node.admin, node.lockPid)
  await noRunOnEndedSession(t, node, stall, stall.stallStart)
})

t.test('runs still start while every turn of the loop comes late (a sustained load, not one stall)', async (t) => {
  const { starts } = await recordingNode(t, [100], 1, 'a first run')
  // An immediate that busies the loop for 150 ms on every turn, queued ahead of the runner's own:
  // each time its run comes to be checked, more than LATE_TURN_MS (100 ms) has passed.
  let busy = true
  const stallEveryTurn = (): void => {
    if (!busy) return
    busyFor(150)
    setImmediate(stallEveryTurn)
  }
  setImmediate(stallEveryTurn)
  t.teardown(() => { busy = false })
  const before = starts.length
  const loadStart = Date.now()
  await waitFor(() => starts.length >= before + 3, { timeoutMs: deadline(10_000), what: 'runs during the load' })
  busy = false
  t.pass(`3 runs started within ${Date.now() - loadStart} ms of a loop late on every turn`)
})

t.test('a stall during the turn a late run waits: the run asks the lock connection itself before it starts', async (t) => {
  // Intervals of different lengths, so that at any turn some run is waiting its one more turn.
  const node = await recordingNode(t, Array.from({ length: 12 }, (_v, i) => 100 + 7 * i), 24, 'a few runs of each')
  // Every turn of the loop comes 150 ms late (each run waits one more turn); then, in one of those
  // turns, PostgreSQL ends the lock session during a 1 s stall.
  let turns = 0
  const stall = await new Promise<ReturnType<typeof endSessionDuringStall>>((resolve) => {
    const turn = (): void => {
      if (++turns < 8) {
        busyFor(150)
        setImmediate(turn)
        return
      }
      resolve(endSessionDuringStall(node.admin, node.lockPid))
    }
    setImmediate(turn)
  })
  // Runs of the same millisecond before the stall began are not after it: nothing runs during it.
  await noRunOnEndedSession(t, node, stall, stall.stallEnd)
})
