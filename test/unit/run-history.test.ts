import { randomUUID } from 'node:crypto'
import { Kysely, PostgresDialect, sql, type KyselyPlugin, type RawNode } from 'kysely'
import pg from 'pg'
import t from 'tap'
import type { Database, PollingRunRow } from '../../src/db/schema.js'
import { MAX_PENDING_HISTORY, RunResultBatcher } from '../../src/scheduler/batcher.js'
import { HistoryPruner } from '../../src/scheduler/history-pruner.js'
import type { RunRecord } from '../../src/scheduler/reaktor-store.js'
import { deadline, waitFor } from '../helpers/timing.js'
import { memoryLogger } from '../helpers/log.js'
import { openTestDatabase, probe, registry, row, scheduler, untilAborted, work } from '../helpers/scheduler.js'

async function runsOf (db: Kysely<Database>, reaktorId: string): Promise<PollingRunRow[]> {
  return await db.selectFrom('polling_runs').selectAll().where('reaktor_id', '=', reaktorId).orderBy('started_at').orderBy('seq').execute()
}

t.test('every run is recorded with its outcome: more_work, no_work, failed, timed_out (then completed), aborted', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const drain = probe('drain', (n) => n <= 2, { interval: '1h', autoStart: true })
  const fails = probe('fails', () => { throw new Error('boom') }, { interval: '1h', autoStart: true })
  // Ignores its signal and settles only when the test lets it, after seeing the row of its timeout.
  let releaseDeaf = (): void => {}
  const deafGate = new Promise<void>((resolve) => { releaseDeaf = resolve })
  const deaf = probe('deaf', async () => { await deafGate; return false }, { interval: '1h', timeout: '100ms', autoStart: true })
  const stopped = probe('stopped', async (_n, ctx) => await untilAborted(ctx.signal), { interval: '1h', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([drain, fails, deaf, stopped].map((p) => p.registration)), nodeId: 'node-h' })
  await s.start()

  const drained = await waitFor(async () => { const rows = await runsOf(db, 'drain'); return rows.length === 3 ? rows : undefined }, { what: 'three drain runs' })
  t.same(drained.map((r) => r.outcome), ['more_work', 'more_work', 'no_work'])
  t.same(drained.map((r) => r.run_id), drain.runs.map((r) => r.runId), 'one row per run, by its run id')
  t.same(drained.map((r) => r.started_at.getTime()), drain.runs.map((r) => r.lastRun), 'started_at is the run\'s lastRun')
  for (const r of drained) {
    t.match(r, { reaktor_id: 'drain', node: 'node-h', error: null })
    t.ok(Number.isInteger(r.duration_ms) && r.duration_ms! >= 0, 'with its duration')
  }

  const [failed] = await waitFor(async () => { const rows = await runsOf(db, 'fails'); return rows.length > 0 ? rows : undefined }, { what: 'the failed run' })
  t.match(failed, { outcome: 'failed', error: 'Error: boom', run_id: fails.runs[0].runId })

  const [atTimeout] = await waitFor(async () => { const rows = await runsOf(db, 'deaf'); return rows.length > 0 ? rows : undefined }, { what: 'the timed-out run at its timeout' })
  t.equal(deaf.runs[0].end, undefined, 'recorded while the run is still in flight')
  t.match(atTimeout, { outcome: 'timed_out', duration_ms: null, run_id: deaf.runs[0].runId, error: /timed out after 100 ms; still settling/ })
  const releasedAt = Date.now()
  releaseDeaf()
  const settled = await waitFor(async () => { const rows = await runsOf(db, 'deaf'); return rows[0]?.duration_ms != null ? rows : undefined }, { what: 'the timed-out run completed' })
  t.equal(settled.length, 1, 'completed in place, not a second row')
  t.match(settled[0], { outcome: 'timed_out', run_id: deaf.runs[0].runId, error: /timed out after 100 ms; it settled \d+ ms after it started/ })
  t.ok(settled[0].duration_ms! >= releasedAt - deaf.runs[0].start, `its duration is the settled one (${settled[0].duration_ms} ms)`)

  await waitFor(() => stopped.runs.length === 1)
  t.equal(await s.stopReaktor('stopped'), true)
  const [aborted] = await waitFor(async () => { const rows = await runsOf(db, 'stopped'); return rows.length > 0 ? rows : undefined }, { what: 'the aborted run' })
  t.match(aborted, { outcome: 'aborted', run_id: stopped.runs[0].runId, error: 'RunStoppedError: run aborted: stopped' })
  t.ok(aborted.duration_ms! >= 0)
  const status = (await row(db, 'stopped'))!
  t.equal(status.last_run, null, 'an aborted run changes no result column')
  t.equal(status.last_outcome, null)
})

t.test('status columns: last success and failure starts, last outcome and duration; last_error kept across a success', async (t) => {
  const { url, db } = await openTestDatabase(t)
  // Run 1 fails, run 2 succeeds (true), run 3 finds nothing after 200 ms, run 4 stays in flight until the stop.
  const p = probe('mixed', async (n, ctx) => {
    if (n === 1) throw new Error('first')
    if (n === 3) await work(200)
    if (n === 4) return await untilAborted(ctx.signal)
    return n === 2
  }, { interval: '100ms', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([p.registration]) })
  await s.start()
  const stored = await waitFor(async () => { const r = await row(db, 'mixed'); return r?.last_run_id === p.runs[2]?.runId ? r : undefined }, { what: 'the third run persisted' })
  t.equal(stored.last_failure_at.getTime(), p.runs[0].lastRun, 'last_failure_at: the start of the failed run')
  t.equal(stored.last_success_at.getTime(), p.runs[2].lastRun, 'last_success_at: the start of the last successful run')
  t.equal(stored.last_outcome, 'no_work')
  t.ok(stored.last_duration_ms >= 195 && stored.last_duration_ms < deadline(5000), `last_duration_ms (${stored.last_duration_ms})`)
  t.equal(stored.last_error, 'Error: first', 'the last failure\'s message stays after successes')
  t.equal(stored.consecutive_failures, 0)
  const since = await waitFor(async () => (await row(db, 'mixed'))?.running_since, { what: 'running_since of run 4' })
  t.equal(since.getTime(), p.runs[3].lastRun, 'the run in flight shows, the results stay those of the last finished run')
})

t.test('running_since is set while a long run is in flight and cleared at its end (and at an abort)', async (t) => {
  const { url, db } = await openTestDatabase(t)
  // Settles only when the test lets it, after seeing its running_since.
  let releaseLong = (): void => {}
  const longGate = new Promise<void>((resolve) => { releaseLong = resolve })
  const long = probe('long', async () => { await longGate; return false }, { interval: '1h', autoStart: true })
  const held = probe('held', async (_n, ctx) => await untilAborted(ctx.signal), { interval: '1h', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([long.registration, held.registration]) })
  await s.start()
  const during = await waitFor(async () => (await row(db, 'long'))?.running_since, { what: 'running_since of the long run' })
  t.equal(during.getTime(), long.runs[0].lastRun, 'the start of the run in flight')
  t.equal(long.runs[0].end, undefined, 'written while it is in flight')
  releaseLong()
  const after = await waitFor(async () => { const r = await row(db, 'long'); return r?.last_run_id === long.runs[0].runId ? r : undefined }, { what: 'the end persisted' })
  t.equal(after.running_since, null, 'cleared with the run\'s end')
  t.equal(after.last_outcome, 'no_work')

  const heldSince = await waitFor(async () => (await row(db, 'held'))?.running_since, { what: 'running_since of the held run' })
  t.equal(heldSince.getTime(), held.runs[0].lastRun)
  await s.stopReaktor('held')
  await waitFor(async () => (await runsOf(db, 'held')).length === 1, { what: 'the aborted run recorded' })
  await waitFor(async () => (await row(db, 'held'))?.running_since === null, { what: 'running_since cleared by the abort' })
})

t.test('retention: at most N + slack rows per reaktor, the newest kept; a lowered N applies at start', async (t) => {
  const { url, db } = await openTestDatabase(t)
  // Written earlier under a higher limit, for a reaktor no longer running: the pass at start prunes it.
  const old = Array.from({ length: 40 }, (_v, i) => ({ run_id: randomUUID(), reaktor_id: 'old', node: 'node-x', started_at: new Date(1_790_000_000_000 + i * 1000), duration_ms: 1, outcome: 'no_work' as const, error: null }))
  await db.insertInto('polling_runs').values(old).execute()
  const RUNS = 120
  const p = probe('many', (n) => n < RUNS, { interval: '1h', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([p.registration]), runHistoryPerReaktor: 5 })
  await s.start()
  await waitFor(() => p.runs.length === RUNS && p.runs[RUNS - 1].end !== undefined, { what: `${RUNS} runs` })
  // slack = max(1, ceil(5 / 10)) = 1; the pruner looks every second.
  const kept = await waitFor(async () => { const rows = await runsOf(db, 'many'); return rows.length <= 6 && rows.some((r) => r.run_id === p.runs[RUNS - 1].runId) ? rows : undefined }, { what: 'history pruned to N + slack with the last run in it' })
  t.ok(kept.length >= 5, `at least N rows kept (${kept.length})`)
  t.same(kept.map((r) => r.run_id), p.runs.slice(-kept.length).map((r) => r.runId), 'the newest runs are the ones kept')
  const oldKept = await waitFor(async () => { const rows = await runsOf(db, 'old'); return rows.length === 5 ? rows : undefined }, { what: 'the old reaktor pruned to 5' })
  t.same(oldKept.map((r) => r.run_id), old.slice(-5).map((r) => r.run_id), 'its newest 5')
})

t.test('RUN_HISTORY_PER_REAKTOR=0 writes no history and deletes none of the stored one (the status columns still move)', async (t) => {
  const { url, db, queries } = await openTestDatabase(t)
  const earlier = [1, 2, 3].map((i) => ({ run_id: randomUUID(), reaktor_id: i === 3 ? 'gone' : 'quiet', node: 'node-x', started_at: new Date(1_790_000_000_000 + i), duration_ms: 1, outcome: 'no_work' as const, error: null }))
  await db.insertInto('polling_runs').values(earlier).execute()
  // Every row ever inserted from now on: the table alone would not tell "none written" from
  // "written, then deleted".
  await sql`create table inserted_runs (run_id uuid)`.execute(db)
  await sql`create function witness_run () returns trigger language plpgsql as $$ begin insert into inserted_runs values (new.run_id); return new; end $$`.execute(db)
  await sql`create trigger witness_run after insert on polling_runs for each row execute function witness_run()`.execute(db)
  const p = probe('quiet', (n) => { if (n === 3) throw new Error('x'); return true }, { interval: '1h', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([p.registration]), runHistoryPerReaktor: 0 })
  await s.start()
  const stored = await waitFor(async () => { const r = await row(db, 'quiet'); return p.runs.length === 3 && r?.last_run_id === p.runs[2].runId ? r : undefined }, { what: 'the third run persisted' })
  t.match(stored, { last_outcome: 'failed', last_error: 'Error: x' })
  t.equal(stored.last_success_at.getTime(), p.runs[1].lastRun)
  // The stop waits for any pruning statement in progress: after it, nothing can delete any more.
  await s.stop()
  t.same((await db.selectFrom('polling_runs').select('run_id').orderBy('started_at').execute()).map((r) => r.run_id), earlier.map((r) => r.run_id), 'no row written, none deleted')
  t.notOk(queries.some((q) => /delete from polling_runs/i.test(q.query.sql)), 'no pruning statement at all')
  // The three runs' results were flushed (above), and a history row goes in the same statement.
  t.same((await sql<{ run_id: string }>`select run_id from inserted_runs`.execute(db)).rows, [], 'none of the three runs was ever written')
})

function result (reaktorId: string, runId: string = randomUUID()): RunRecord {
  const at = Date.now()
  return { reaktorId, runId, lastRun: at, nextRun: at + 60_000, lastError: null, consecutiveFailures: 0, outcome: 'no_work', durationMs: 3, successAt: at, failureAt: null, version: '1', partition: 0, generation: '0' }
}

t.test('a database outage keeps the history rows and writes them once it is back', async (t) => {
  const { url, db } = await openTestDatabase(t)
  await db.insertInto('polling_reaktors').values(['a', 'b'].map((id) => ({ reaktor_id: id, state: 'running' as const, interval: '1s', updated_at: new Date(), state_version: 1 }))).execute()
  // The batcher's own pool gives up on a statement after 300 ms; the outage: polling_runs locked meanwhile.
  const pool = new pg.Pool({ connectionString: url, max: 2, statement_timeout: 300 })
  const bdb = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) })
  t.teardown(async () => await bdb.destroy())
  const log = memoryLogger()
  const batcher = new RunResultBatcher({ db: bdb, owner: 'node-o', intervalMs: 60_000, log, historyPerReaktor: 100 })
  t.teardown(() => batcher.discard())
  const holder = new pg.Client({ connectionString: url })
  await holder.connect()
  t.teardown(async () => await holder.end())
  await holder.query('begin')
  await holder.query('lock table polling_runs in access exclusive mode')
  const ids: string[] = []
  for (const id of ['a', 'b', 'a', 'b', 'a']) { const r = result(id); ids.push(r.runId); batcher.record(r) }
  await t.rejects(batcher.flush(), { code: '57014' }, 'the flush fails during the outage')
  t.equal(batcher.historySize, 5, 'every history row is kept')
  const r6 = result('b')
  ids.push(r6.runId)
  batcher.record(r6)
  await holder.query('rollback')
  await batcher.flush()
  const stored = await db.selectFrom('polling_runs').select(['run_id', 'node']).orderBy('seq').execute()
  t.same(stored.map((r) => r.run_id), ids, 'all six written after the outage, in order')
  t.ok(stored.every((r) => r.node === 'node-o'))
  t.equal(batcher.historySize, 0)
})

t.test('pending history is bounded: beyond the limit the oldest are dropped, counted and logged once', async (t) => {
  const { db } = await openTestDatabase(t)
  const log = memoryLogger()
  const batcher = new RunResultBatcher({ db, owner: 'node-o', intervalMs: 3_600_000, log, historyPerReaktor: 100 })
  t.teardown(() => batcher.discard())
  const first = result('x')
  batcher.record(first)
  for (let i = 1; i < MAX_PENDING_HISTORY; i++) batcher.record(result('x'))
  t.equal(batcher.historySize, MAX_PENDING_HISTORY)
  t.equal(batcher.historyDropped, 0)
  batcher.record(result('x'))
  t.ok(batcher.historySize <= MAX_PENDING_HISTORY, `at most ${MAX_PENDING_HISTORY} rows (${batcher.historySize})`)
  t.equal(batcher.historyDropped, MAX_PENDING_HISTORY / 10)
  for (let i = 0; i < MAX_PENDING_HISTORY / 10; i++) batcher.record(result('x'))
  t.equal(batcher.historyDropped, 2 * MAX_PENDING_HISTORY / 10, 'counted every time')
  t.equal(log.lines.filter((l) => /run history not persisted/.test(l.msg ?? '')).length, 1, 'logged once per outage')
})

t.test('a history row PostgreSQL refuses is isolated and dropped; the other rows and results persist', async (t) => {
  const { db } = await openTestDatabase(t)
  await db.insertInto('polling_reaktors').values(['a', 'b'].map((id) => ({ reaktor_id: id, state: 'running' as const, interval: '1s', updated_at: new Date(), state_version: 1 }))).execute()
  const log = memoryLogger()
  const batcher = new RunResultBatcher({ db, owner: 'node-o', intervalMs: 60_000, log, historyPerReaktor: 100 })
  t.teardown(() => batcher.discard())
  const good = result('a')
  batcher.record(good)
  // Not a uuid: polling_runs refuses it (22P02); the result row itself is fine.
  batcher.record(result('b', 'not-a-run-id'))
  await batcher.flush()
  t.same((await db.selectFrom('polling_runs').select('run_id').execute()).map((r) => r.run_id), [good.runId], 'the good row persisted')
  t.equal((await row(db, 'a'))!.last_run_id, good.runId)
  t.equal((await row(db, 'b'))!.last_run_id, 'not-a-run-id', 'the result of the refused history row persisted too')
  t.equal(batcher.historyDropped, 1)
  t.ok(log.lines.some((l) => l.level === 'error' && /history row refused/.test(l.msg ?? '')), 'the drop is logged')
  const later = result('a')
  batcher.record(later)
  await batcher.flush()
  t.equal((await db.selectFrom('polling_runs').select('run_id').where('run_id', '=', later.runId).execute()).length, 1, 'later rows persist as usual')
})

t.test('a timed-out run\'s two rows in one flush (at its timeout, at its settling) are written as one', async (t) => {
  const { db } = await openTestDatabase(t)
  await db.insertInto('polling_reaktors').values({ reaktor_id: 'a', state: 'running', interval: '1s', updated_at: new Date(), state_version: 1 }).execute()
  const batcher = new RunResultBatcher({ db, owner: 'node-o', intervalMs: 60_000, log: memoryLogger(), historyPerReaktor: 100 })
  t.teardown(() => batcher.discard())
  const timedOut: RunRecord = { ...result('a'), outcome: 'timed_out', durationMs: null, lastError: 'at the timeout', successAt: null, failureAt: Date.now() }
  batcher.record(timedOut)
  batcher.record({ ...timedOut, durationMs: 120, lastError: 'settled' })
  await batcher.flush()
  t.match(await db.selectFrom('polling_runs').selectAll().execute(), [{ run_id: timedOut.runId, outcome: 'timed_out', duration_ms: 120, error: 'settled' }])
  t.equal(batcher.historySize, 0)
})

t.test('running_since is written only under the partition\'s current generation (a fenced node never sets it)', async (t) => {
  const { db } = await openTestDatabase(t)
  await db.insertInto('reaktor_partitions').values({ partition: 3, generation: 7 }).execute()
  await db.insertInto('polling_reaktors').values(['cur', 'stale'].map((id) => ({ reaktor_id: id, state: 'running' as const, interval: '1s', updated_at: new Date(), state_version: 1, partition: 3 }))).execute()
  const batcher = new RunResultBatcher({ db, owner: 'node-o', intervalMs: 60_000, log: memoryLogger(), historyPerReaktor: 100 })
  t.teardown(() => batcher.discard())
  const at = Date.now()
  batcher.runStarted('cur', randomUUID(), at, 3, '7')
  batcher.runStarted('stale', randomUUID(), at, 3, '6')
  await batcher.flush()
  t.equal((await row(db, 'cur'))!.running_since?.getTime(), at, 'current generation: set')
  t.equal((await row(db, 'stale'))!.running_since, null, 'older generation (the partition was taken over since): not set')
})

t.test('a fenced node\'s aborted run and a run aborted by the shutdown are recorded, with their reasons', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const fenced = probe('fenced', async (n, ctx) => n === 1 ? await untilAborted(ctx.signal) : false, { interval: '1h', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([fenced.registration]), nodeId: 'node-f' })
  await s.start()
  await waitFor(() => fenced.runs.length === 1, { what: 'the first run' })
  const { rows: [terminated] } = await sql<{ ok: boolean }>`select pg_terminate_backend(${s.lockConnectionPid!}) as ok`.execute(db)
  t.ok(terminated.ok, 'lock session terminated')
  const [aborted] = await waitFor(async () => { const rows = await runsOf(db, 'fenced'); return rows.length > 0 ? rows : undefined }, { what: 'the fenced run recorded' })
  t.match(aborted, { run_id: fenced.runs[0].runId, outcome: 'aborted', node: 'node-f', error: 'RunStoppedError: run aborted: lock connection lost' })

  await s.stop()

  const held = probe('held', async (_n, ctx) => await untilAborted(ctx.signal), { interval: '1h', autoStart: true })
  const s2 = scheduler(t, db, url, { reaktors: registry([held.registration]), nodeId: 'node-g' })
  await s2.start()
  await waitFor(() => held.runs.length === 1, { what: 'the held run' })
  await s2.stop()
  t.match(await runsOf(db, 'held'), [{ run_id: held.runs[0].runId, outcome: 'aborted', node: 'node-g', error: 'RunStoppedError: run aborted: shutdown' }], 'written by the shutdown\'s last flush')
})

t.test('a node taking a reaktor over shows no running_since a dead node left behind (its own runs write theirs)', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const p = probe('left', () => false, { interval: '1h', autoStart: true })
  // A node killed mid-run left running_since set; its next run is an hour away, so only the
  // claim can tell the status that nothing is in flight any more.
  const leftAt = new Date(Date.now() - 60_000)
  await db.insertInto('polling_reaktors').values({ reaktor_id: 'left', state: 'running', interval: '1h', updated_at: leftAt, state_version: 1, next_run: new Date(Date.now() + 3_600_000), running_since: leftAt, owner: 'node-dead' }).execute()
  const s = scheduler(t, db, url, { reaktors: registry([p.registration]), nodeId: 'node-b' })
  await s.start()
  await waitFor(async () => (await s.status('left')).owner === 'node-b', { what: 'node-b owning the reaktor' })
  t.equal(p.runs.length, 0, 'no run of node-b yet (its next run is an hour away)')
  t.equal((await s.status('left')).runningSince, null, 'no run in flight on the live owner')
  t.equal((await row(db, 'left'))!.running_since, null, 'cleared in the row')
})

t.test('after a takeover the status columns continue from the row: a success keeps the last failure, a failure the last success', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const ok = probe('ok-now', () => false, { interval: '1h', autoStart: true })
  const bad = probe('bad-now', () => { throw new Error('new') }, { interval: '1h', autoStart: true })
  const before = { success: new Date(1_790_000_000_000), failure: new Date(1_790_000_100_000) }
  await db.insertInto('polling_reaktors').values(['ok-now', 'bad-now'].map((id) => ({
    reaktor_id: id, state: 'running' as const, interval: '1h', updated_at: before.failure, state_version: 1, next_run: before.failure,
    last_run: before.failure, last_error: 'Error: old', consecutive_failures: 2, last_success_at: before.success, last_failure_at: before.failure, last_outcome: 'failed' as const, last_duration_ms: 5
  }))).execute()
  const s = scheduler(t, db, url, { reaktors: registry([ok.registration, bad.registration]), nodeId: 'node-next' })
  await s.start()
  const okRow = await waitFor(async () => { const r = await row(db, 'ok-now'); return r?.last_run_id === ok.runs[0]?.runId ? r : undefined }, { what: 'the new owner\'s success persisted' })
  t.match(okRow, { last_outcome: 'no_work', last_error: 'Error: old', consecutive_failures: 0 })
  t.equal(okRow.last_success_at.getTime(), ok.runs[0].lastRun, 'last success: the new run')
  t.equal(okRow.last_failure_at.getTime(), before.failure.getTime(), 'last failure: continued from the row')
  const badRow = await waitFor(async () => { const r = await row(db, 'bad-now'); return r?.last_run_id === bad.runs[0]?.runId ? r : undefined }, { what: 'the new owner\'s failure persisted' })
  t.match(badRow, { last_outcome: 'failed', last_error: 'Error: new', consecutive_failures: 3 })
  t.equal(badRow.last_failure_at.getTime(), bad.runs[0].lastRun, 'last failure: the new run')
  t.equal(badRow.last_success_at.getTime(), before.success.getTime(), 'last success: continued from the row')
})

t.test('a duration beyond the integer column (a run settling after 24.8 days) or below 0 (the clock stepped back) is written at the bound, not refused', async (t) => {
  const { db } = await openTestDatabase(t)
  await db.insertInto('polling_reaktors').values(['long', 'back'].map((id) => ({ reaktor_id: id, state: 'running' as const, interval: '1s', updated_at: new Date(), state_version: 1 }))).execute()
  const batcher = new RunResultBatcher({ db, owner: 'node-o', intervalMs: 60_000, log: memoryLogger(), historyPerReaktor: 100 })
  t.teardown(() => batcher.discard())
  const long = { ...result('long'), outcome: 'timed_out' as const, durationMs: 30 * 24 * 3_600_000, successAt: null, failureAt: Date.now(), lastError: 'settled after 30 days' }
  const back = { ...result('back'), durationMs: -5 }
  batcher.record(long)
  batcher.record(back)
  await batcher.flush()
  t.match(await row(db, 'long'), { last_run_id: long.runId, last_duration_ms: 2_147_483_647, last_outcome: 'timed_out' }, 'the result is written, its duration at the largest the column holds')
  t.match(await row(db, 'back'), { last_run_id: back.runId, last_duration_ms: 0 })
  t.same((await db.selectFrom('polling_runs').select(['reaktor_id', 'duration_ms']).orderBy('reaktor_id').execute()), [{ reaktor_id: 'back', duration_ms: 0 }, { reaktor_id: 'long', duration_ms: 2_147_483_647 }], 'and both history rows')
  t.equal(batcher.rowsDropped + batcher.historyDropped, 0, 'nothing refused')
})

t.test('after a pruning statement timed out, the smaller statements that follow still cover every reaktor', async (t) => {
  const { db, pool } = await openTestDatabase(t)
  // 500 reaktors (one first-pass batch) with 2 rows each; keep 1.
  await sql`insert into polling_runs (run_id, reaktor_id, node, started_at, duration_ms, outcome)
    select gen_random_uuid(), 'r' || lpad(i::text, 3, '0'), 'node-x', now() - (j || ' s')::interval, 1, 'no_work'
    from generate_series(1, 500) as i, generate_series(1, 2) as j`.execute(db)
  // The first pruning statement fails as one cut short by the statement timeout (57014) would.
  let failed = false
  const timeoutOnce: KyselyPlugin = {
    transformQuery ({ node }) {
      if (!failed && node.kind === 'RawNode' && (node as RawNode).sqlFragments.join('').includes('delete from polling_runs')) {
        failed = true
        throw Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' })
      }
      return node
    },
    async transformResult ({ result }) { return result }
  }
  const pruner = new HistoryPruner({ db: new Kysely<Database>({ dialect: new PostgresDialect({ pool }), plugins: [timeoutOnce] }), keep: 1, log: memoryLogger() })
  t.teardown(async () => await pruner.stop())
  pruner.start()
  // The retry comes a second after the failure.
  const left = await waitFor(async () => {
    const { rows: [r] } = await sql<{ n: number }>`select count(*)::int as n from (select reaktor_id from polling_runs group by reaktor_id having count(*) > 1) as over`.execute(db)
    return failed && r.n === 0 ? r : undefined
  }, { what: 'every reaktor pruned to 1 row', timeoutMs: deadline(10_000) }).catch((err: Error) => err)
  t.notOk(left instanceof Error, 'every reaktor pruned after the retry')
  t.equal(pruner.deleted, 500, 'one row deleted per reaktor')
})
