import t from 'tap'
import pg from 'pg'
import { waitFor } from '../helpers/context.js'
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

t.test('after a stall during which its lock session ended, the node starts no run before it has read the lost session', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const starts: Array<{ at: number, lockPid: number | undefined }> = []
  let s: ReturnType<typeof scheduler> | undefined = undefined
  // Runs return at once: between two runs the runner's interval timer is always pending.
  const timed = {
    reaktorDefinitionId: 'timed',
    interval: '100ms',
    autoStart: true,
    createReaktor: () => () => { starts.push({ at: Date.now(), lockPid: s?.lockConnectionPid }); return false }
  }
  const log = memoryLogger()
  s = scheduler(t, db, url, { reaktors: registry([timed]), log, reconnectMinMs: 200 })
  await s.start()
  await waitFor(() => starts.length >= 3, { what: 'a few runs' })
  const lockPid = s.lockConnectionPid!

  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  t.teardown(async () => await admin.end())
  // Sent before the stall (a client's write goes out at once); PostgreSQL ends the session during it.
  const terminated = admin.query<{ ok: boolean }>('select pg_terminate_backend($1) as ok', [lockPid])
  const stallStart = Date.now()
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, STALL_MS)
  const stallEnd = Date.now()
  t.ok((await terminated).rows[0].ok, 'the lock session was terminated during the stall')

  await waitFor(() => log.lines.some((l) => /lock connection lost/.test(l.msg ?? '')), { timeoutMs: 5000, what: 'the node to fence itself' })
  await waitFor(() => s.lockConnectionPid !== undefined && s.lockConnectionPid !== lockPid && starts.some((r) => r.at > stallEnd && r.lockPid === s?.lockConnectionPid),
    { timeoutMs: 10_000, what: 'runs again on a new lock session' })
  const stale = starts.filter((r) => r.at >= stallStart && r.lockPid === lockPid)
  t.same(stale.map((r) => `${r.at - stallEnd} ms after the stall`), [], 'no run started on the ended session after the stall')
  t.ok(stallEnd - stallStart >= STALL_MS, `the loop stalled for ${stallEnd - stallStart} ms`)
})

t.test('runs still start while every turn of the loop comes late (a sustained load, not one stall)', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const starts: number[] = []
  const timed = {
    reaktorDefinitionId: 'timed',
    interval: '100ms',
    autoStart: true,
    createReaktor: () => () => { starts.push(Date.now()); return false }
  }
  const s = scheduler(t, db, url, { reaktors: registry([timed]), log: memoryLogger() })
  await s.start()
  await waitFor(() => starts.length >= 1, { what: 'a first run' })
  // An immediate that busies the loop for 150 ms on every turn, queued ahead of the runner's own:
  // each time its run comes to be checked, more than LATE_TURN_MS (100 ms) has passed.
  let busy = true
  const stallEveryTurn = (): void => {
    if (!busy) return
    const until = Date.now() + 150
    while (Date.now() < until) { /* the load */ }
    setImmediate(stallEveryTurn)
  }
  setImmediate(stallEveryTurn)
  t.teardown(() => { busy = false })
  const before = starts.length
  const loadStart = Date.now()
  await waitFor(() => starts.length >= before + 3, { timeoutMs: 10_000, what: 'runs during the load' })
  busy = false
  t.pass(`3 runs started within ${Date.now() - loadStart} ms of a loop late on every turn`)
})

t.test('a stall during the turn a late run waits: the run asks the lock connection itself before it starts', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const starts: Array<{ at: number, lockPid: number | undefined }> = []
  let s: ReturnType<typeof scheduler> | undefined = undefined
  // Intervals of different lengths, so that at any turn some run is waiting its one more turn.
  const reaktors = Array.from({ length: 12 }, (_v, i) => ({
    reaktorDefinitionId: `late-${i}`,
    interval: `${100 + 7 * i}ms`,
    autoStart: true,
    createReaktor: () => () => { starts.push({ at: Date.now(), lockPid: s?.lockConnectionPid }); return false }
  }))
  const log = memoryLogger()
  s = scheduler(t, db, url, { reaktors: registry(reaktors), log, reconnectMinMs: 200 })
  await s.start()
  await waitFor(() => starts.length >= 24, { what: 'a few runs of each' })
  const lockPid = s.lockConnectionPid!
  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  t.teardown(async () => await admin.end())

  // Every turn of the loop comes 150 ms late (each run waits one more turn); then, in one of those
  // turns, PostgreSQL ends the lock session during a 1 s stall.
  let turns = 0
  let stallStart = 0
  let stallEnd = 0
  let terminated: Promise<pg.QueryResult<{ ok: boolean }>> | undefined
  await new Promise<void>((resolve) => {
    const turn = (): void => {
      turns++
      if (turns < 8) {
        const until = Date.now() + 150
        while (Date.now() < until) { /* the load */ }
        setImmediate(turn)
        return
      }
      terminated = admin.query<{ ok: boolean }>('select pg_terminate_backend($1) as ok', [lockPid])
      stallStart = Date.now()
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, STALL_MS)
      stallEnd = Date.now()
      resolve()
    }
    setImmediate(turn)
  })
  t.ok((await terminated!).rows[0].ok, 'the lock session was terminated during the stall')
  await waitFor(() => log.lines.some((l) => /lock connection lost/.test(l.msg ?? '')), { timeoutMs: 5000, what: 'the node to fence itself' })
  await waitFor(() => s.lockConnectionPid !== undefined && s.lockConnectionPid !== lockPid && starts.some((r) => r.at > stallEnd && r.lockPid === s?.lockConnectionPid),
    { timeoutMs: 10_000, what: 'runs again on a new lock session' })
  // Runs of the same millisecond before the stall began are not after it: nothing runs during it.
  const stale = starts.filter((r) => r.at >= stallEnd && r.lockPid === lockPid)
  t.same(stale.map((r) => `${r.at - stallEnd} ms after the stall`), [], 'no run started on the ended session after the stall')
  t.ok(stallEnd - stallStart >= STALL_MS, `the loop stalled for ${stallEnd - stallStart} ms`)
})
