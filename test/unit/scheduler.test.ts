import { randomUUID } from 'node:crypto'
import t from 'tap'
import { RunStoppedError, RunTimeoutError } from '../../src/scheduler/index.js'
import { RunResultBatcher } from '../../src/scheduler/batcher.js'
import { describe as describeError } from '../../src/scheduler/reaktor-runner.js'
import type { RunRecord } from '../../src/scheduler/reaktor-store.js'
import { bound, deadline, waitFor } from '../helpers/timing.js'
import { memoryLogger } from '../helpers/log.js'
import { openTestDatabase, probe, reaktorLocks, registry, row, scheduler, untilAborted, work } from '../helpers/scheduler.js'

/** A run id: a UUID of version 7 (time-ordered). */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

t.test('true → the next run at once; false → one effective interval after the run ENDED', async (t) => {
  const { url, db } = await openTestDatabase(t)
  // Runs 1–4 drain (true), run 5 finds nothing (false) and takes 200 ms, run 6 again finds nothing.
  const p = probe('drain', async (n, ctx) => { await work(n === 5 ? 200 : 10, ctx.signal); return n < 5 }, { interval: '400ms', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([p.registration]) })
  await s.start()
  await waitFor(() => p.runs.length >= 7 && p.runs[6].end !== undefined, { what: '7 runs' })
  const [r1, r2, r3, r4, r5, r6, r7] = p.runs
  // "At once", told from the 400 ms interval wait (whose gaps the checks below allow from 395 ms).
  const atOnce = bound(0, 'turns', { below: 395 })
  for (const [prev, next] of [[r1, r2], [r2, r3], [r3, r4], [r4, r5]]) {
    t.ok(next.start - prev.end! < atOnce, `after true the next run starts at once (${next.start - prev.end!} ms)`)
  }
  t.ok(r6.start - r5.end! >= 395, `after false the next run waits the interval from the END of the run (${r6.start - r5.end!} ms)`)
  t.ok(r6.start - r5.start >= 595, 'so the wait is not measured from the start of the run')
  t.ok(r7.start - r6.end! >= 395, `and again after the next false (${r7.start - r6.end!} ms)`)
  t.equal(p.maxActive(), 1, 'never two runs at once')
  await waitFor(async () => (await row(db, 'drain'))?.last_run?.getTime() >= r7.lastRun, { what: 'lastRun persisted' })
  const stored = (await row(db, 'drain'))!
  t.ok(stored.next_run.getTime() >= stored.last_run.getTime() + 400, 'nextRun is one interval after the last run')
})

t.test('an interval below the minimum runs at the minimum (effectiveInterval)', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const p = probe('fast', () => false, { interval: '10ms', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([p.registration]), minIntervalMs: 300 })
  await s.start()
  await waitFor(() => p.runs.length >= 3 && p.runs[2].end !== undefined, { what: '3 runs' })
  t.ok(p.runs[1].start - p.runs[0].end! >= 295, 'the second run waits the 300 ms minimum, not 10 ms')
  t.ok(p.runs[2].start - p.runs[1].end! >= 295)
  const status = await s.status('fast')
  t.equal(status.interval, '10ms')
  t.equal(status.effectiveInterval, '300ms')
})

t.test('a drain of synchronous `true` results never blocks the event loop', async (t) => {
  const { url, db } = await openTestDatabase(t)
  let runs = 0
  const s = scheduler(t, db, url, {
    reaktors: registry([{ reaktorDefinitionId: 'busy', interval: '1s', autoStart: true, createReaktor: () => () => { runs++; return true } }])
  })
  await s.start()
  await waitFor(() => runs > 100, { what: 'the drain to run' })
  const before = runs
  const started = Date.now()
  await new Promise((resolve) => setTimeout(resolve, 20))
  t.ok(Date.now() - started < deadline(1000), `a 20 ms timer still fires during the drain (${Date.now() - started} ms)`)
  // A query through the pool (I/O) is not starved either.
  t.ok(await row(db, 'busy'), 'database I/O completes during the drain')
  t.ok(runs > before, 'and the drain went on meanwhile')
  await s.stopReaktor('busy')
  const after = runs
  await waitFor(async () => (await row(db, 'busy'))?.state === 'stopped')
  await new Promise((resolve) => setImmediate(resolve))
  t.ok(runs - after <= 1, 'stop ends the drain')
})

t.test('failures: throw, rejection, non-boolean and timeout are recorded, logged and followed by the interval', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const log = memoryLogger()
  const throws = probe('throws', () => { throw new Error('boom') }, { interval: '300ms', autoStart: true })
  const rejects = probe('rejects', async () => await Promise.reject(new Error('nope')), { interval: '300ms', autoStart: true })
  const notBool = probe('not-bool', () => 'yes', { interval: '300ms', autoStart: true })
  const slow = probe('slow', async (_n, ctx) => await untilAborted(ctx.signal), { interval: '300ms', timeout: '100ms', autoStart: true })
  const all = [throws, rejects, notBool, slow]
  const s = scheduler(t, db, url, { reaktors: registry(all.map((p) => p.registration)), log })
  await s.start()
  for (const p of all) {
    const id = p.registration.reaktorDefinitionId
    await waitFor(async () => p.runs.length >= 3 && p.runs[2].end !== undefined && (await row(db, id))?.consecutive_failures >= 3, { what: `${id} failing 3 times` })
    t.ok(p.runs[1].start - p.runs[0].end! >= 295, `${id}: a failed run is followed by the interval wait`)
    t.ok(p.runs[2].start - p.runs[1].end! >= 295)
  }
  t.match((await row(db, 'throws'))!.last_error, /boom/)
  t.match((await row(db, 'rejects'))!.last_error, /nope/)
  t.match((await row(db, 'not-bool'))!.last_error, /returned string.*boolean/)
  t.match((await row(db, 'slow'))!.last_error, /timed out after 100 ms/)
  t.ok(slow.runs[0].context.signal.aborted, 'the timeout aborted the run\'s signal')
  t.type(slow.runs[0].aborted, RunTimeoutError)
  t.ok(slow.runs[0].end! - slow.runs[0].start >= 95, 'not before the timeout')
  for (const id of ['throws', 'rejects', 'not-bool', 'slow']) {
    t.ok(log.lines.some((l) => l.level === 'warn' && (l.obj as { reaktorId?: string }).reaktorId === id && /run failed/.test(l.msg ?? '')), `${id}: the failure is logged with the reaktor id`)
  }
})

t.test('a success resets consecutiveFailures and keeps lastError until the next failure', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const p = probe('flaky', (n) => { if (n <= 2) throw new Error(`fail ${n}`); return false }, { interval: '100ms', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([p.registration]) })
  await s.start()
  await waitFor(async () => (await row(db, 'flaky'))?.consecutive_failures === 2, { what: 'two failures' })
  t.match((await row(db, 'flaky'))!.last_error, /fail 2/)
  await waitFor(async () => p.runs.length >= 3 && (await row(db, 'flaky'))?.consecutive_failures === 0, { what: 'the success' })
  const stored = (await row(db, 'flaky'))!
  t.match(stored.last_error, /fail 2/, 'the last failure stays on record after a success')
  const status = await s.status('flaky')
  t.equal(status.consecutiveFailures, 0)
  t.match(status.lastError, /fail 2/)
})

t.test('each run gets signal, log, settings, reaktorId and a fresh runId; createReaktor once per start', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const p = probe('ctx', (n) => n % 3 !== 0, { interval: '100ms' })
  const s = scheduler(t, db, url, { reaktors: registry([p.registration], { greeting: 'hello' }) })
  await s.start()
  t.equal(p.runs.length, 0, 'not autoStart: nothing runs')
  t.equal(await s.startReaktor('ctx'), true)
  await waitFor(() => p.runs.length >= 4)
  const ctx = p.runs[0].context
  t.type(ctx.signal, AbortSignal)
  t.equal(ctx.reaktorId, 'ctx')
  t.same(ctx.settings, { greeting: 'hello' })
  t.type(ctx.log.info, 'function')
  t.match(ctx.runId, UUID)
  t.equal(new Set(p.runs.map((r) => r.runId)).size, p.runs.length, 'every run has its own runId')
  t.equal(p.factoryCalls(), 1, 'createReaktor is called once per start, not per run')
  t.equal(await s.startReaktor('ctx'), false, 'start on a running reaktor is idempotent')
  t.equal(await s.stopReaktor('ctx'), true)
  t.equal(await s.stopReaktor('ctx'), false, 'stop on a stopped reaktor is idempotent')
  const before = p.runs.length
  t.equal(await s.startReaktor('ctx'), true)
  await waitFor(() => p.runs.length > before)
  t.equal(p.factoryCalls(), 2, 'and again after a stop and a start')
  await t.rejects(s.startReaktor('nope'), { name: 'UnknownReaktorError' })
})

t.test('stop aborts the in-flight run, ignores its result and schedules nothing more', async (t) => {
  const { url, db } = await openTestDatabase(t)
  // Returns true once aborted: if that result were used, another run would follow at once.
  const blocked = probe('blocked', async (_n, ctx) => await untilAborted(ctx.signal), { interval: '100ms', autoStart: true })
  const metronome = probe('metronome', () => false, { interval: '100ms', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([blocked.registration, metronome.registration]) })
  await s.start()
  await waitFor(() => blocked.runs.length === 1 && metronome.runs.length >= 1, { what: 'the first runs' })
  t.equal(await s.stopReaktor('blocked'), true)
  await waitFor(() => blocked.runs[0].end !== undefined, { what: 'the aborted run to settle' })
  t.type(blocked.runs[0].aborted, RunStoppedError, 'the run\'s signal was aborted by the stop')
  const stored = (await row(db, 'blocked'))!
  t.equal(stored.state, 'stopped', 'the stop is persisted')
  t.equal(stored.next_run, null, 'nothing is scheduled')
  t.equal(stored.owner, null)
  // Let the other reaktor tick five more intervals: the stopped one must not run again.
  const ticks = metronome.runs.length
  await waitFor(() => metronome.runs.length >= ticks + 5, { what: 'five more metronome runs' })
  t.equal(blocked.runs.length, 1, 'no run after the stop, and the in-flight result scheduled nothing')
  t.equal((await row(db, 'blocked'))!.last_run, null, 'the aborted run\'s result was not recorded')
})

t.test('never two runs of one reaktor at once, even across rapid stop/start', async (t) => {
  const { url, db } = await openTestDatabase(t)
  // Ignores its signal for 30 ms, so a stop's in-flight run outlives the stop and the next start.
  const p = probe('busy', async (n) => { await work(30); return n % 2 === 0 }, { interval: '50ms', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([p.registration]) })
  await s.start()
  for (let i = 0; i < 10; i++) {
    await waitFor(() => p.runs.some((r) => r.end === undefined), { what: 'a run in flight' })
    await s.stopReaktor('busy')
    await s.startReaktor('busy')
    s.requestReconcile()
  }
  await waitFor(() => p.runs.length >= 15)
  t.equal(p.maxActive(), 1, 'at most one run in flight at any moment')
  const sorted = [...p.runs].sort((a, b) => a.start - b.start)
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i - 1].end !== undefined) t.ok(sorted[i].start >= sorted[i - 1].end!, `run ${i + 1} started after run ${i} ended`)
  }
})

t.test('a stored nextRun is continued: future → not before it; overdue → exactly one run now', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const now = Date.now()
  await db.insertInto('polling_reaktors').values([
    { reaktor_id: 'later', state: 'running', interval: '1s', next_run: new Date(now + 1500), updated_at: new Date(now) },
    { reaktor_id: 'overdue', state: 'running', interval: '1s', next_run: new Date(now - 3_600_000), updated_at: new Date(now) }
  ]).execute()
  const later = probe('later', () => false, { interval: '1s', autoStart: true })
  const overdue = probe('overdue', () => false, { interval: '1s', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([later.registration, overdue.registration]) })
  await s.start()
  t.equal(s.coldStart, true)
  const stored = (await row(db, 'later'))!
  t.equal(stored.next_run.getTime(), now + 1500, 'the boot did not overwrite nextRun')
  await waitFor(() => later.runs.length >= 1, { what: 'the later run' })
  t.ok(later.runs[0].start >= now + 1490, `runs at the stored nextRun, not at boot (${later.runs[0].start - now} ms after)`)
  await waitFor(() => overdue.runs.length >= 2, { what: 'two overdue runs' })
  // Told from a run one interval (1 s) after the boot: the bound stays under it at any scale.
  t.ok(overdue.runs[0].start - now < bound(0, 'second', { below: 1000 }), 'an overdue reaktor runs at once')
  t.ok(overdue.runs[1].start - overdue.runs[0].end! >= 995, 'then one interval later: no burst of the missed runs')
})

t.test('run results are flushed in batches: one statement for many reaktors', async (t) => {
  const { url, db, queries } = await openTestDatabase(t)
  const N = 40
  const probes = Array.from({ length: N }, (_, i) => probe(`batch-${String(i).padStart(2, '0')}`, () => false, { interval: '1h', autoStart: true }))
  const s = scheduler(t, db, url, { reaktors: registry(probes.map((p) => p.registration)), flushIntervalMs: 250 })
  await s.start()
  await waitFor(() => probes.every((p) => p.runs.length === 1 && p.runs[0].end !== undefined), { what: 'every reaktor to run once' })
  await waitFor(async () => (await db.selectFrom('polling_reaktors').select('reaktor_id').where('last_run', 'is not', null).execute()).length === N, { what: 'all results persisted' })
  const flushes = queries.filter((q) => /update polling_reaktors as p set\s+last_run/.test(q.query.sql))
  t.ok(flushes.length >= 1 && flushes.length <= 3, `${N} results took ${flushes.length} statement(s), not ${N}`)
  t.equal(flushes.reduce((sum, q) => sum + (String(q.query.parameters.find((p) => String(p).includes('"batch-'))).match(/"batch-/g) ?? []).length, 0), N, 'each result written once')
  t.same(s.flushStats, { flushes: flushes.length, rows: N, pending: 0 })
})

t.test('a crash loses at most the unflushed batch, never a state change', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const a = probe('a', () => false, { interval: '1h' })
  const b = probe('b', () => false, { interval: '1h', autoStart: true })
  // Results are flushed only once a minute: whatever ran is still in memory at the "crash".
  const s = scheduler(t, db, url, { reaktors: registry([a.registration, b.registration]), flushIntervalMs: 60_000 })
  await s.start()
  await waitFor(() => b.runs.length === 1 && b.runs[0].end !== undefined)
  t.equal(await s.startReaktor('a'), true)
  await waitFor(() => a.runs.length === 1 && a.runs[0].end !== undefined)
  t.equal(await s.stopReaktor('b'), true)
  t.equal(s.flushStats.pending, 2, 'both results are waiting for the next batch')
  s.terminate()
  const ra = (await row(db, 'a'))!
  const rb = (await row(db, 'b'))!
  t.equal(ra.state, 'running', 'the acknowledged start survived the crash')
  t.equal(ra.last_run, null, 'the unflushed run result is lost (at most one batch)')
  t.equal(rb.state, 'stopped', 'the acknowledged stop survived the crash')
  t.equal(rb.last_run, null)
})

t.test('a late flush never undoes a stop', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const p = probe('late', () => false, { interval: '1h', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([p.registration]), flushIntervalMs: 60_000 })
  await s.start()
  await waitFor(() => p.runs.length === 1 && p.runs[0].end !== undefined)
  t.equal(await s.stopReaktor('late'), true)
  await s.stop() // flushes the result written before the stop
  const stored = (await row(db, 'late'))!
  t.equal(stored.state, 'stopped')
  t.equal(stored.next_run, null, 'the flushed nextRun did not come back')
  t.equal(stored.owner, null, 'nor the owner')
  t.equal(stored.last_run?.getTime(), p.runs[0].lastRun, 'the run itself is recorded')
})

t.test('shutdown aborts in-flight runs, waits up to the grace period, flushes and releases everything', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const log = memoryLogger()
  const polite = probe('polite', async (_n, ctx) => await untilAborted(ctx.signal), { interval: '1h', autoStart: true })
  // Ignores its signal: the shutdown must not wait for it longer than the grace period.
  const stubborn = probe('stubborn', async () => { await work(5000); return false }, { interval: '1h', autoStart: true })
  const done = probe('done', () => false, { interval: '1h', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([polite.registration, stubborn.registration, done.registration]), shutdownGraceMs: 400, flushIntervalMs: 60_000, log })
  await s.start()
  await waitFor(() => polite.runs.length === 1 && stubborn.runs.length === 1 && done.runs[0]?.end !== undefined, { what: 'the runs' })
  const started = Date.now()
  await s.stop()
  const took = Date.now() - started
  // The grace is 400 ms; the stubborn run would hold the stop for 5 s.
  t.ok(took >= 390 && took < deadline(3000, { below: 5000 }), `stop waited for the grace period, not for the stubborn run (${took} ms)`)
  t.type(polite.runs[0].aborted, RunStoppedError, 'the in-flight run\'s signal was aborted')
  t.ok(stubborn.runs[0].context.signal.aborted, 'also the stubborn one\'s')
  t.ok(log.lines.some((l) => l.level === 'warn' && /grace period/.test(l.msg ?? '')), 'the overrun is logged')
  t.equal((await row(db, 'done'))!.last_run?.getTime(), done.runs[0].lastRun, 'the pending batch was flushed')
  for (const id of ['polite', 'done']) t.same(await reaktorLocks(db, id), [], `${id}: lock released`)
  // Its run may still be going: another node must not start it beside that run.
  t.equal((await reaktorLocks(db, 'stubborn')).length, 1, 'stubborn: its partition stays locked while its run is in flight')
  await waitFor(async () => (await reaktorLocks(db, 'stubborn')).length === 0, { timeoutMs: 5000 + deadline(3000), what: 'stubborn: lock released once its run settled' })
  for (const id of ['polite', 'stubborn', 'done']) {
    const stored = (await row(db, id))!
    t.equal(stored.state, 'running', `${id}: a shutdown is not a stop`)
    t.equal(stored.owner, null, `${id}: no owner any more`)
  }
})

t.test('an error text with a NUL character is stored without it and does not hold back other results', async (t) => {
  const { url, db } = await openTestDatabase(t)
  // PostgreSQL text cannot hold U+0000: unsanitized, this row failed the whole batch, forever.
  const nul = probe('nul', () => { throw new Error('bad \u0000byte') }, { interval: '1h', autoStart: true })
  const fine = probe('fine', () => false, { interval: '1h', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([nul.registration, fine.registration]), flushIntervalMs: 100 })
  await s.start()
  await waitFor(async () => (await row(db, 'nul'))?.last_error !== null && (await row(db, 'fine'))?.last_run !== null, { what: 'both results persisted' })
  t.equal((await row(db, 'nul'))!.last_error, 'Error: bad byte', 'stored, without the NUL')
  t.equal((await row(db, 'fine'))!.last_run.getTime(), fine.runs[0].lastRun, 'lastRun is the start of that run')
  t.equal(describeError(new Error('x'.repeat(5000))).length, 2001, 'and capped at 2000 characters (plus an ellipsis)')
})

t.test('ids and error texts with quotes, backslashes, commas, braces and NULL-like words are stored exactly', async (t) => {
  const { url, db } = await openTestDatabase(t)
  // The batched write encodes its arrays itself: every character that means something in an
  // array literal, in an id and in an error text.
  const text = 'say "hi", \\ {a,b} NULL \\" end'
  const odd = probe('odd "id", {x}\\NULL', () => { throw new Error(text) }, { interval: '1h', autoStart: true })
  const plain = probe('NULL', () => false, { interval: '1h', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([odd.registration, plain.registration]), flushIntervalMs: 50 })
  await s.start()
  await waitFor(async () => (await row(db, 'odd "id", {x}\\NULL'))?.last_error != null && (await row(db, 'NULL'))?.last_run != null, { what: 'both results persisted' })
  t.equal((await row(db, 'odd "id", {x}\\NULL'))!.last_error, `Error: ${text}`)
  t.equal((await row(db, 'NULL'))!.last_error, null, 'a reaktor named NULL is itself, its error text stays null')
  t.equal((await row(db, 'NULL'))!.last_run.getTime(), plain.runs[0].lastRun, 'lastRun is the start of that run')
})

t.test('a run result PostgreSQL refuses is isolated, retried a few times and dropped; the others persist', async (t) => {
  const { db } = await openTestDatabase(t)
  await db.insertInto('polling_reaktors').values(['a', 'b', 'poison', 'c'].map((id) => ({ reaktor_id: id, state: 'running' as const, interval: '1s', updated_at: new Date(), state_version: 1 }))).execute()
  const log = memoryLogger()
  const batcher = new RunResultBatcher({ db, owner: 'node-a', intervalMs: 20, log })
  t.teardown(() => batcher.discard())
  const result = (reaktorId: string, version = '1'): RunRecord => ({
    reaktorId, runId: randomUUID(), lastRun: Date.now(), nextRun: Date.now() + 60_000, lastError: null, consecutiveFailures: 0, outcome: 'no_work', durationMs: 1, successAt: Date.now(), failureAt: null, version, partition: 0, generation: '0'
  })
  // Any value PostgreSQL rejects makes the statement fail (here: 22P02, not a bigint).
  batcher.record(result('a'))
  batcher.record(result('poison', 'not-a-number'))
  batcher.record(result('b'))
  await batcher.flush()
  t.ok((await row(db, 'a'))!.last_run, 'a persisted despite the refused row in its batch')
  t.ok((await row(db, 'b'))!.last_run, 'b too')
  await waitFor(() => batcher.rowsDropped === 1 && batcher.size === 0, { what: 'the refused row to be dropped' })
  t.ok(log.lines.some((l) => l.level === 'error' && (l.obj as { reaktorId?: string }).reaktorId === 'poison' && /dropped/.test(l.msg ?? '')), 'the drop is logged with the reaktor id')
  t.equal((await row(db, 'poison'))!.last_run, null)
  batcher.record(result('c'))
  await batcher.flush()
  t.ok((await row(db, 'c'))!.last_run, 'later results persist as usual')
})

t.test('an aktor throwing a value that cannot be stringified fails the run; the reaktor keeps running', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown): void => { unhandled.push(reason) }
  process.on('unhandledRejection', onUnhandled)
  t.teardown(() => { process.off('unhandledRejection', onUnhandled) })
  const bare = probe('bare', () => { throw Object.create(null) }, { interval: '100ms', autoStart: true })
  const hostile = probe('hostile', () => { throw { toString () { throw new Error('no') } } }, { interval: '100ms', autoStart: true })
  const nameless = probe('nameless', () => { throw new Proxy({}, { getPrototypeOf () { throw new Error('trap') } }) }, { interval: '100ms', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([bare.registration, hostile.registration, nameless.registration]) })
  await s.start()
  for (const p of [bare, hostile, nameless]) {
    const id = p.registration.reaktorDefinitionId
    await waitFor(async () => p.runs.length >= 3 && (await row(db, id))?.consecutive_failures >= 2, { what: `${id} to fail and run again` })
    t.match((await row(db, id))!.last_error, /^non-error thrown: \[object /, `${id}: recorded as a failure`)
  }
  t.same(unhandled, [], 'no unhandled rejection')
})

t.test('a run that ignores its signal past the timeout is logged at the timeout, not only when it settles', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const log = memoryLogger()
  const deaf = probe('deaf', async () => { await work(1000); return false }, { interval: '1h', timeout: '100ms', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([deaf.registration]), log })
  await s.start()
  const warning = await waitFor(() => log.lines.find((l) => /timed out/.test(l.msg ?? '')), { what: 'the timeout warning' })
  t.equal(deaf.runs[0].end, undefined, 'logged while the run is still in flight')
  t.match(warning, { level: 'warn', obj: { reaktorId: 'deaf', runId: deaf.runs[0].runId, timeoutMs: 100 } })
  await waitFor(async () => (await row(db, 'deaf'))?.last_error, { what: 'the failure recorded' })
  t.match((await row(db, 'deaf'))!.last_error, /timed out after 100 ms/)
})

t.test('run times are stored exactly to the millisecond', async (t) => {
  const { db } = await openTestDatabase(t)
  // Times whose seconds are not exact in binary (a float of seconds would round some down by 1 ms).
  const times = Array.from({ length: 200 }, (_v, i) => 1_795_449_793_000 + i * 7 + 1)
  await db.insertInto('polling_reaktors').values(times.map((_t, i) => ({ reaktor_id: `t${i}`, state: 'running' as const, interval: '1s', updated_at: new Date(), state_version: 1 }))).execute()
  const batcher = new RunResultBatcher({ db, owner: 'node-a', intervalMs: 20, log: memoryLogger() })
  t.teardown(() => batcher.discard())
  times.forEach((at, i) => batcher.record({ reaktorId: `t${i}`, runId: randomUUID(), lastRun: at, nextRun: at + 3000, lastError: null, consecutiveFailures: 0, outcome: 'no_work', durationMs: 1, successAt: at, failureAt: null, version: '1', partition: 0, generation: '0' }))
  await batcher.flush()
  const stored = await db.selectFrom('polling_reaktors').select(['reaktor_id', 'last_run']).execute()
  const byId = new Map(stored.map((r) => [r.reaktor_id, r.last_run?.getTime()]))
  t.same(times.filter((at, i) => byId.get(`t${i}`) !== at), [], 'every lastRun as recorded')
})
