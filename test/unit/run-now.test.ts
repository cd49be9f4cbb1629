/**
 * Run now, below the HTTP layer: the runner's coalescing (one extra run right after the run in
 * flight, however many requests), the request's one statement (the durable part and the NOTIFY),
 * the batched write that must not push a pending request back, and the owners that act on it: a
 * node that takes the reaktor over later, and one whose runner is being started from a read that
 * predates the request, and the fencing grace of a takeover, which a request never shortens.
 */
import t, { type Test } from 'tap'
import pg from 'pg'
import { ReaktorRunner, type RunOutcome } from '../../src/scheduler/reaktor-runner.js'
import { parseRunRequest, RUN_NOW_CHANNEL, writeRunRequest } from '../../src/scheduler/run-now.js'
import { writeRunResults as writeFlush } from '../../src/scheduler/flush-store.js'
import { writeStart, writeStop, type RunRecord } from '../../src/scheduler/reaktor-store.js'
import { claimPartitions, ensurePartitions } from '../../src/scheduler/ownership/partition-store.js'
import { deferred } from '../helpers/deferred.js'
import type { TestContext } from '../helpers/test-context.js'
import { bound, deadline, waitFor } from '../helpers/timing.js'
import { memoryLogger } from '../helpers/log.js'
import { endSessionAndWakeNodes, openTestDatabase, probe, registry, row, scheduler } from '../helpers/scheduler.js'

/** "Right after": the next turn of the event loop (the alternative these tell it from is an hour later). */
const RIGHT_AFTER_MS = bound(0, 'turns')

/** Two turns of the event loop: a run queued by the one that just ended would be in flight by then. */
async function turns (): Promise<void> {
  for (let i = 0; i < 2; i++) await new Promise((resolve) => setImmediate(resolve))
}

interface Ended { record: RunRecord, outcome: RunOutcome }

/** A runner of a probe, without a scheduler: every run end (and its record) in `ended`. */
function runnerOf (t: TestContext, p: ReturnType<typeof probe>, opts: { intervalMs: number, mayRun?: () => boolean | Promise<boolean>, now?: () => number }): { runner: ReaktorRunner, ended: Ended[] } {
  const id = p.registration.reaktorDefinitionId
  const ended: Ended[] = []
  const runner = new ReaktorRunner({
    reaktorId: id,
    reaktor: registry([p.registration]).get(id)!,
    effectiveIntervalMs: opts.intervalMs,
    version: '1',
    consecutiveFailures: 0,
    partition: 0,
    generation: '1',
    log: memoryLogger(),
    now: opts.now ?? Date.now,
    mayRun: opts.mayRun ?? (() => true),
    onRunEnd: (record, outcome) => { ended.push({ record: { ...record }, outcome }) },
    onRecord: () => {},
    onRunStart: () => {},
    onAborted: () => {}
  })
  t.teardown(async () => await runner.halt())
  return { runner, ended }
}

/** A started runner (hourly) whose first run is in flight until `first` gives its result; later runs find no work. */
async function runInFlight (t: TestContext, name: string): Promise<{ first: { resolve: (result: boolean) => void }, p: ReturnType<typeof probe>, runner: ReaktorRunner, ended: Ended[] }> {
  const first = deferred<boolean>()
  const p = probe(name, async (n) => n === 1 ? await first.promise : false)
  const { runner, ended } = runnerOf(t, p, { intervalMs: 3_600_000 })
  runner.start(null)
  await waitFor(() => p.runs.length === 1, { what: 'the first run' })
  return { first, p, runner, ended }
}

/** The last run's record schedules the next one an interval after that run ended (not sooner). */
function nextAfterInterval (t: Test, ended: Ended[], intervalMs: number, what: string): void {
  const { record } = ended[ended.length - 1]
  const endedAt = record.nextRun! - intervalMs
  t.ok(endedAt >= record.lastRun && endedAt <= Date.now(), `${what}: the next run is one interval after the run ended (${endedAt - record.lastRun} ms after its start)`)
}

t.test('runner: a run in flight and five requests: exactly one more run, right after it, then the interval', async (t) => {
  const { first, p, runner, ended } = await runInFlight(t, 'coalesce')
  for (let i = 0; i < 5; i++) t.equal(runner.runNow(), true, `request ${i + 1} accepted`)
  await turns()
  t.equal(p.runs.length, 1, 'no run beside the one in flight')
  first.resolve(false)
  await waitFor(() => p.runs[1]?.end !== undefined, { what: 'the requested run' })
  const [r1, r2] = p.runs
  t.ok(r2.start >= r1.end!, 'it started after the run in flight ended')
  t.ok(r2.start - r1.end! <= RIGHT_AFTER_MS, `right after it (${r2.start - r1.end!} ms)`)
  await waitFor(() => !runner.running, { what: 'the runner to be idle' })
  await turns()
  t.equal(p.runs.length, 2, 'five requests, one extra run')
  t.equal(p.maxActive(), 1, 'never two at once')
  nextAfterInterval(t, ended, 3_600_000, 'the extra run')

  // A request after the extra run started is a new one: one more run after it.
  t.equal(runner.runNow(), true)
  await waitFor(() => p.runs[2]?.end !== undefined, { what: 'the run of the next request' })
  await waitFor(() => !runner.running, { what: 'the runner to be idle' })
  await turns()
  t.equal(p.runs.length, 3)
})

t.test('runner: a `true` result with a request in flight runs again at once, once', async (t) => {
  const { first, p, runner, ended } = await runInFlight(t, 'drains')
  runner.runNow()
  runner.runNow()
  first.resolve(true)
  await waitFor(() => p.runs[1]?.end !== undefined, { what: 'the next run' })
  t.ok(p.runs[1].start - p.runs[0].end! <= RIGHT_AFTER_MS, `at once (${p.runs[1].start - p.runs[0].end!} ms)`)
  await waitFor(() => !runner.running, { what: 'the runner to be idle' })
  await turns()
  t.equal(p.runs.length, 2, 'the run the `true` asked for is the requested one: no third')
  nextAfterInterval(t, ended, 3_600_000, 'the second run')
})

t.test('runner: idle with a long interval: runs at once, then its interval again', async (t) => {
  const p = probe('hourly', () => false)
  const { runner, ended } = runnerOf(t, p, { intervalMs: 3_600_000 })
  runner.start(null)
  await waitFor(() => p.runs[0]?.end !== undefined && !runner.running, { what: 'the first run' })
  for (let i = 2; i <= 3; i++) {
    const asked = Date.now()
    t.equal(runner.runNow(), true)
    await waitFor(() => p.runs[i - 1]?.end !== undefined && !runner.running, { what: `run ${i}` })
    t.ok(p.runs[i - 1].start - asked <= RIGHT_AFTER_MS, `run ${i} started ${p.runs[i - 1].start - asked} ms after the request, not an hour later`)
    nextAfterInterval(t, ended, 3_600_000, `run ${i}`)
  }
  await turns()
  t.equal(p.runs.length, 3)

  // The same with an interval short enough to watch: the next run comes one interval after the
  // requested run ended, neither sooner nor from the old schedule.
  const q = probe('watched', () => false)
  const watched = runnerOf(t, q, { intervalMs: 400 })
  watched.runner.start(Date.now() + 3_600_000)
  const asked = Date.now()
  watched.runner.runNow()
  await waitFor(() => q.runs[1]?.end !== undefined, { timeoutMs: deadline(5000), what: 'the interval run after the requested one' })
  t.ok(q.runs[0].start - asked <= RIGHT_AFTER_MS, `requested run at once (${q.runs[0].start - asked} ms)`)
  t.ok(q.runs[1].start - q.runs[0].end! >= 395, `then the interval from its end (${q.runs[1].start - q.runs[0].end!} ms)`)
})

t.test('runner: halted or handed over, it ignores a request', async (t) => {
  const p = probe('halted', () => false)
  const { runner } = runnerOf(t, p, { intervalMs: 3_600_000 })
  t.equal(runner.runNow(), false, 'not started yet')
  runner.start(Date.now() + 3_600_000)
  await runner.halt()
  t.equal(runner.runNow(), false, 'halted')
  const q = probe('handed-over', () => false)
  const finishing = runnerOf(t, q, { intervalMs: 3_600_000 })
  finishing.runner.start(Date.now() + 3_600_000)
  await finishing.runner.finish()
  t.equal(finishing.runner.runNow(), false, 'finishing (a handover)')
  await turns()
  t.equal(p.runs.length + q.runs.length, 0, 'no run')

  // Halted with a request pending: the run in flight ends, nothing follows.
  const { first, p: r, runner: stopped } = await runInFlight(t, 'stopped-in-flight')
  stopped.runNow()
  const halted = stopped.halt()
  first.resolve(false)
  await halted
  await turns()
  t.equal(r.runs.length, 1, 'a stop wins over the pending request')
})

t.test('runner: a request before the run in flight called its aktor is served by that run', async (t) => {
  const check = deferred<boolean>()
  const p = probe('early', () => false)
  let checks = 0
  const { runner } = runnerOf(t, p, { intervalMs: 3_600_000, mayRun: async () => { checks++; return checks === 1 ? await check.promise : true } })
  runner.start(null)
  await waitFor(() => checks === 1 && runner.running, { what: 'the ownership check of the first run' })
  runner.runNow()
  check.resolve(true)
  await waitFor(() => p.runs[0]?.end !== undefined && !runner.running, { what: 'the first run' })
  await turns()
  t.equal(p.runs.length, 1, 'one run: it started after the request')
})

t.test('runner: a request in the same millisecond as the start of the run that has just ended is run, not taken as served', async (t) => {
  // The clock reads in whole milliseconds: a run can start and end, and a request come, within
  // one. Held still here, so that every reading falls in the same millisecond.
  const frozen = Date.now()
  const p = probe('same-ms', () => false)
  const { runner } = runnerOf(t, p, { intervalMs: 3_600_000, now: () => frozen })
  runner.start(null)
  await waitFor(() => p.runs[0]?.end !== undefined && !runner.running, { what: 'the first run' })
  t.equal(runner.runNow(frozen, frozen), true, 'accepted')
  await waitFor(() => p.runs[1]?.end !== undefined && !runner.running, { timeoutMs: deadline(5000), what: 'the requested run' })
  await turns()
  t.equal(p.runs.length, 2, 'one run for the request')
  // A request stamped before that run started is served by it.
  t.equal(runner.runNow(frozen, frozen - 1), true)
  await turns()
  t.equal(p.runs.length, 2, 'one stamped a millisecond before the run adds none')
})

t.test('runner: a run blocked past its timeout gets its requested run right after it settles', async (t) => {
  const first = deferred<boolean>()
  const p = probe('stuck', async (n) => n === 1 ? await first.promise : false, { timeout: '100ms' })
  const { runner, ended } = runnerOf(t, p, { intervalMs: 3_600_000 })
  runner.start(null)
  await waitFor(() => runner.blocked, { what: 'the run to time out' })
  t.equal(runner.runNow(), true)
  runner.runNow()
  await turns()
  t.equal(p.runs.length, 1, 'nothing runs beside the stuck run')
  first.resolve(false)
  await waitFor(() => p.runs[1]?.end !== undefined && !runner.running, { what: 'the requested run' })
  t.ok(p.runs[1].start >= p.runs[0].end!, 'after it settled')
  t.ok(p.runs[1].start - p.runs[0].end! <= RIGHT_AFTER_MS, `right after (${p.runs[1].start - p.runs[0].end!} ms)`)
  await turns()
  t.equal(p.runs.length, 2)
  nextAfterInterval(t, ended, 3_600_000, 'the requested run')
})

t.test('runner: a request inside the fencing grace runs when the grace ends, not before', async (t) => {
  const p = probe('grace', () => false)
  const { runner } = runnerOf(t, p, { intervalMs: 3_600_000 })
  runner.start(Date.now() + 3_600_000)
  const from = Date.now() + 300
  runner.runNow(from)
  await waitFor(() => p.runs.length === 1, { timeoutMs: deadline(5000), what: 'the requested run' })
  t.ok(p.runs[0].start >= from, `not before the grace ended (${p.runs[0].start - from} ms after)`)
})

t.test('runner: a timer that fires before the wall clock reads the due time does not run early', async (t) => {
  // Timers and the wall clock round differently (a timer may fire a millisecond "early" by
  // Date.now); here the wall clock is held back on purpose, by more than a rounding, once the timer is set.
  let lag = 0
  const now = (): number => Date.now() - lag
  const seen: number[] = []
  const p = probe('not-early', () => { seen.push(now()); return false })
  const { runner } = runnerOf(t, p, { intervalMs: 3_600_000, now })
  runner.start(now() + 3_600_000)
  const at = now() + 50
  t.equal(runner.runNow(at), true)
  lag = 30
  await waitFor(() => p.runs.length === 1, { timeoutMs: deadline(5000), what: 'the run' })
  t.ok(seen[0] >= at, `it ran when its clock read the due time (${seen[0] - at} ms after), not when the timer first fired`)
})

/** Notifications on the run-now channel, in order: reaktor id @ request time. */
async function listenRunNow (t: TestContext, url: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  t.teardown(async () => await client.end())
  const heard: string[] = []
  client.on('notification', (msg) => { if (msg.channel === RUN_NOW_CHANNEL) { const [id, at] = parseRunRequest(msg.payload ?? ''); heard.push(`${id}@${String(at)}`) } })
  await client.query(`listen ${RUN_NOW_CHANNEL}`)
  return heard
}

/** A flush of run results only (no history rows, no running marks). */
async function writeRunResults (db: Parameters<typeof writeFlush>[0], owner: string, results: RunRecord[]): Promise<number> {
  return await writeFlush(db, owner, { results, since: results.map(() => null), history: [], marks: [] })
}

t.test('the request: one statement on a running row; a result flushed after it keeps the next run at the request', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const heard = await listenRunNow(t, url)
  await ensurePartitions(db, 4)
  const generation = (await claimPartitions(db, 'node-a', [1])).get(1)!.generation
  const t0 = Date.parse('2026-11-27T10:00:00.000Z')
  const { version } = await writeStart(db, 'x', '1h', new Date(t0), 1)
  const result = (lastRun: number, nextRun: number | null): RunRecord =>
    ({ reaktorId: 'x', runId: `run-${lastRun}`, lastRun, nextRun, lastError: null, consecutiveFailures: 0, outcome: 'no_work', durationMs: 1, successAt: lastRun, failureAt: null, version: version!, partition: 1, generation })

  // Run 1 (started at t0 + 10 ms) is in flight when the request comes (t0 + 20 ms); it ends and its
  // result, flushed after the request, plans the next run an hour after its end.
  t.equal(await writeRunRequest(db, 'x', new Date(t0 + 20)), true)
  t.equal((await row(db, 'x'))!.next_run.getTime(), t0, 'an overdue next run stays as it was')
  await writeRunResults(db, 'node-a', [result(t0 + 10, t0 + 510 + 3_600_000)])
  t.equal((await row(db, 'x'))!.next_run.getTime(), t0 + 20, 'the flushed result keeps the next run at the pending request')

  // The run that serves it (it started after the request) plans as usual.
  await writeRunResults(db, 'node-a', [result(t0 + 600, t0 + 700 + 3_600_000)])
  t.equal((await row(db, 'x'))!.next_run.getTime(), t0 + 700 + 3_600_000, 'served: the interval again')

  // Requested an hour before the next run: brought forward to the request.
  t.equal(await writeRunRequest(db, 'x', new Date(t0 + 1000)), true)
  t.equal((await row(db, 'x'))!.next_run.getTime(), t0 + 1000, 'a future next run is brought forward to the request')

  // A run blocked past its timeout: its next run stays unset, whatever is pending.
  await writeRunResults(db, 'node-a', [{ ...result(t0 + 900, null), blocked: true }])
  t.equal((await row(db, 'x'))!.next_run, null, 'blocked: no next run')
  t.equal(await writeRunRequest(db, 'x', new Date(t0 + 1100)), true)
  t.equal((await row(db, 'x'))!.next_run, null, 'a request on a blocked reaktor leaves it unscheduled')
  await writeRunResults(db, 'node-a', [result(t0 + 900, t0 + 1200 + 3_600_000)])
  t.equal((await row(db, 'x'))!.next_run.getTime(), t0 + 1100, 'settled: its requested run is due at once')

  // Stopped: nothing is written, nothing announced.
  await writeStop(db, 'x', '1h', new Date(t0 + 2000), 1)
  const before = await row(db, 'x')
  t.equal(await writeRunRequest(db, 'x', new Date(t0 + 2100)), false, 'a stopped reaktor is not requested')
  t.same(await row(db, 'x'), before, 'its row is unchanged')
  t.equal(await writeRunRequest(db, 'never-registered', new Date(t0 + 2100)), false, 'nor is a reaktor without a row')
  // Notifications arrive in commit order: once y's is in, any sent for the refused ones is too.
  await writeStart(db, 'y', '1h', new Date(t0 + 3000), 1)
  t.equal(await writeRunRequest(db, 'y', new Date(t0 + 3100)), true)
  await waitFor(() => heard.some((h) => h.startsWith('y@')), { what: 'the notifications' })
  t.same(heard, [t0 + 20, t0 + 1000, t0 + 1100].map((at) => `x@${at}`).concat(`y@${t0 + 3100}`),
    'one notification per accepted request, with its time, none for the refused ones')
})

t.test('the request: one in the same millisecond as the start of the run whose result is flushed stays pending', async (t) => {
  const { db } = await openTestDatabase(t)
  await ensurePartitions(db, 4)
  const generation = (await claimPartitions(db, 'node-a', [1])).get(1)!.generation
  const t0 = Date.parse('2026-11-27T10:00:00.000Z')
  const { version } = await writeStart(db, 'x', '1h', new Date(t0), 1)
  const result = (lastRun: number, nextRun: number): RunRecord =>
    ({ reaktorId: 'x', runId: `run-${lastRun}`, lastRun, nextRun, lastError: null, consecutiveFailures: 0, outcome: 'no_work', durationMs: 0, successAt: lastRun, failureAt: null, version: version!, partition: 1, generation })
  await writeRunResults(db, 'node-a', [result(t0 + 10, t0 + 10 + 3_600_000)])

  // Run 2 starts and ends at t0 + 100, and the request comes in that millisecond too (after it, or
  // not: the times cannot tell). Its result, flushed after the request, must not drop it.
  t.equal(await writeRunRequest(db, 'x', new Date(t0 + 100)), true)
  await writeRunResults(db, 'node-a', [result(t0 + 100, t0 + 100 + 3_600_000)])
  t.equal((await row(db, 'x'))!.next_run.getTime(), t0 + 100, 'the next run stays at the request')

  // A run that started a millisecond after it serves it.
  await writeRunResults(db, 'node-a', [result(t0 + 101, t0 + 101 + 3_600_000)])
  t.equal((await row(db, 'x'))!.next_run.getTime(), t0 + 101 + 3_600_000, 'served: the interval again')
})

/** An hourly reaktor that node-a ran once (its result flushed) and then left: nobody owns it now. */
async function ranOnceThenLeft (t: TestContext, id: string): Promise<{ url: string, db: Awaited<ReturnType<typeof openTestDatabase>>['db'], p: ReturnType<typeof probe> }> {
  const { url, db } = await openTestDatabase(t)
  const p = probe(id, () => false, { interval: '1h', autoStart: true })
  const a = scheduler(t, db, url, { nodeId: 'node-a', reaktors: registry([p.registration]) })
  await a.start()
  await waitFor(async () => p.runs[0]?.end !== undefined && (await row(db, id))?.last_run !== null, { what: 'the first run, flushed' })
  await a.stop()
  return { url, db, p }
}

t.test('a request made while no node owns the reaktor is run by the next owner at once', async (t) => {
  const { url, db, p } = await ranOnceThenLeft(t, 'hourly')
  const stored = (await row(db, 'hourly'))!
  t.ok(stored.next_run.getTime() > Date.now() + 3_500_000, 'next run an hour away')

  const b = scheduler(t, db, url, { nodeId: 'node-b', reaktors: registry([p.registration]) })
  const asked = Date.now()
  t.equal(await b.runReaktor('hourly'), true, 'accepted while no node runs')
  await b.start()
  await waitFor(() => p.runs[1]?.end !== undefined, { timeoutMs: deadline(5000), what: 'the requested run on the next owner' })
  t.pass(`node-b ran it ${p.runs[1].start - asked} ms after the request`)
  await waitFor(async () => (await row(db, 'hourly'))!.last_run.getTime() === p.runs[1].lastRun, { what: 'its result flushed' })
  t.ok((await row(db, 'hourly'))!.next_run.getTime() >= p.runs[1].end! + 3_599_000, 'then its interval again')
  await t.rejects(b.runReaktor('nope'), { name: 'UnknownReaktorError' })
})

t.test('a request heard while the owner starts the runner from an older read is not lost', async (t) => {
  const { url, db, p } = await ranOnceThenLeft(t, 'late')

  // node-b has read the row (next run an hour away) and is about to start the runner from that
  // read when the request comes; its lock connection hears the request before the runner exists.
  let requested = false
  const b = scheduler(t, db, url, {
    nodeId: 'node-b',
    reaktors: registry([p.registration]),
    reconcileHook: async (step, ids) => {
      if (step !== 'claimed' || !ids.includes('late') || requested) return
      requested = true
      t.equal(await writeRunRequest(db, 'late', new Date()), true)
      // A round trip on the lock connection: PostgreSQL delivers the pending notification first.
      await (b as unknown as { lock: { ping: () => Promise<boolean> } }).lock.ping()
    }
  })
  await b.start()
  await waitFor(() => p.runs[1]?.end !== undefined, { timeoutMs: deadline(5000), what: 'the requested run' })
  t.ok(requested, 'the request came between the read and the start of the runner')
  t.equal(p.maxActive(), 1)
})

/**
 * A partition taken from a lock session that ended without releasing it starts its runs only after
 * the fencing grace (its previous holder may not have aborted them yet). A request heard inside the
 * grace waits for it too, whether the runner exists by then or is still being started.
 */
for (const when of ['after the runner started', 'before the runner started'] as const) {
  t.test(`a request heard inside the fencing grace of a takeover (${when}) runs when the grace ends, not before`, async (t) => {
    const { url, db } = await openTestDatabase(t)
    const p = probe('guarded', () => false, { interval: '1h', autoStart: true })
    const a = scheduler(t, db, url, { nodeId: 'node-a', reaktors: registry([p.registration]) })
    await a.start()
    await waitFor(async () => p.runs[0]?.end !== undefined && (await row(db, 'guarded'))?.last_run !== null, { what: 'the first run, flushed' })
    let armed = false
    const b = scheduler(t, db, url, {
      nodeId: 'node-b',
      reaktors: registry([p.registration]),
      reconcileHook: async (step, ids) => {
        if (!armed || step !== 'claimed' || !ids.includes('guarded')) return
        armed = false
        if (when === 'before the runner started') {
          await writeRunRequest(db, 'guarded', new Date())
          await (b as unknown as { lock: { ping: () => Promise<boolean> } }).lock.ping()
        } else {
          // Sent once this pass has started the runner (right after this hook), heard within the grace.
          setImmediate(() => { void writeRunRequest(db, 'guarded', new Date()) })
        }
      }
    })
    await b.start()
    await waitFor(() => b.ownershipShare.members === 2, { what: 'node-b to see both nodes' })
    t.same(a.ownedReaktorIds(), ['guarded'], 'node-a runs it')

    const admin = new pg.Client({ connectionString: url })
    await admin.connect()
    t.teardown(async () => await admin.end())
    armed = true
    const ending = Date.now()
    await endSessionAndWakeNodes(admin, a.lockConnectionPid!)
    await waitFor(() => p.runs[1] !== undefined, { timeoutMs: deadline(5000), what: 'the requested run on node-b' })
    t.notOk(armed, 'the request came during node-b\'s takeover')
    t.same(b.ownedReaktorIds(), ['guarded'], 'node-b took it over')
    // node-b read the partition free after the session ended, which was after `ending`.
    const after = p.runs[1].start - ending
    t.ok(after >= 200, `started ${after} ms after the session was ended: not inside the 200 ms fencing grace`)
    t.ok(after <= bound(200, 'second'), 'and at once after it, not an hour later')
  })
}

t.test('a request that comes while the owner hands the reaktor over between runs is run by the next holder at once', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const first = deferred<boolean>()
  const p = probe('handed', async (n) => n === 1 ? await first.promise : false, { interval: '1h', autoStart: true })
  const a = scheduler(t, db, url, { nodeId: 'node-a', reaktors: registry([p.registration]) })
  await a.start()
  await waitFor(() => p.runs.length === 1, { what: 'the first run in flight' })
  // The handover a rebalancing would start: the run in flight finishes, then the partition is
  // released and announced, and taken again (here by the same node, the only one).
  const internals = a as unknown as { ownership: { handovers: { handOver: (partition: number) => void } }, lock: { ping: () => Promise<boolean> } }
  internals.ownership.handovers.handOver(a.partitionOfReaktor('handed')!)
  t.same(a.ownedReaktorIds(), [], 'being handed over')
  t.equal(await a.runReaktor('handed'), true, 'the request is accepted meanwhile')
  await internals.lock.ping()
  first.resolve(false)
  await waitFor(() => p.runs[1]?.end !== undefined, { timeoutMs: deadline(5000), what: 'the requested run after the handover' })
  t.ok(p.runs[1].start >= p.runs[0].end!, 'after the run in flight ended')
  t.pass(`run ${p.runs[1].start - p.runs[0].end!} ms after the handed-over run ended, not an hour later`)
  t.equal(p.maxActive(), 1)
})

/**
 * A request's notification may reach the owner after the run that serves it has started (the
 * owner reads its lock connection a moment late): that run still serves it, as docs/operating.md says
 * ("served by the first run that starts after it"), and no extra run follows. Played here with
 * requests stamped before the run's start, written (and so heard) after it.
 */
t.test('a request heard only after the run that serves it started adds no run', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const second = deferred<boolean>()
  const p = probe('heard-late', async (n) => n === 2 ? await second.promise : false, { interval: '1h', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([p.registration]) })
  await s.start()
  await waitFor(() => p.runs[0]?.end !== undefined, { what: 'the first run' })
  const lock = (s as unknown as { lock: { ping: () => Promise<boolean> } }).lock
  t.equal(await s.runReaktor('heard-late'), true)
  await waitFor(() => p.runs.length === 2, { what: 'the requested run in flight' })
  // Stamped before run 2 started, heard while it is in flight (a round trip on the lock connection
  // delivers the pending notification first).
  t.equal(await writeRunRequest(db, 'heard-late', new Date(p.runs[1].lastRun - 1)), true)
  await lock.ping()
  second.resolve(false)
  await waitFor(() => p.runs[1].end !== undefined, { what: 'run 2 to end' })
  // ... and one heard after run 2 ended.
  t.equal(await writeRunRequest(db, 'heard-late', new Date(p.runs[1].lastRun - 1)), true)
  await lock.ping()
  await turns()
  // A request stamped after run 2 started is a new one: it still runs at once (the control case).
  const asked = Date.now()
  t.equal(await writeRunRequest(db, 'heard-late', new Date(asked)), true)
  await waitFor(() => p.runs.length >= 3 && p.runs[2].end !== undefined, { timeoutMs: deadline(5000), what: 'the run of the new request' })
  t.ok(p.runs[2].start >= asked, 'the new request ran after it was made')
  await lock.ping()
  await turns()
  t.equal(p.runs.length, 3, 'the requests stamped before run 2 started added no run: run 2 served them')
  t.equal(p.maxActive(), 1)
})

t.test('a run request notification: its time and the reaktor id (an id may hold spaces; a bare id has no time)', async (t) => {
  t.same(parseRunRequest('1795602566400 drain-demo'), ['drain-demo', 1795602566400])
  t.same(parseRunRequest('1795602566400 an id with spaces'), ['an id with spaces', 1795602566400])
  t.same(parseRunRequest('drain-demo'), ['drain-demo', undefined])
  t.same(parseRunRequest('not-a-time drain demo'), ['not-a-time drain demo', undefined])
})
