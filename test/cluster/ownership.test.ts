import t from 'tap'
import { sql } from 'kysely'
import { CLUSTER_LOCK_NAMESPACE, DEFAULT_PARTITIONS, partitionOf, RunStoppedError, type Scheduler } from '../../src/scheduler/index.js'
import { writeStop } from '../../src/scheduler/reaktor-store.js'
import { deadline, waitFor } from '../helpers/timing.js'
import { memoryLogger } from '../helpers/log.js'
import { openTestDatabase, partitionLocks, probe, reaktorLocks, registry, row, scheduler, untilAborted } from '../helpers/scheduler.js'

t.test('a running reaktor runs under its partition lock, held once on the dedicated connection; stop ends its runs', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const p = probe('locked', () => false, { interval: '100ms' })
  const s = scheduler(t, db, url, { reaktors: registry([p.registration]) })
  await s.start()
  t.equal(s.partitions, DEFAULT_PARTITIONS, 'a new cluster gets the default partition count')
  await waitFor(async () => (await partitionLocks(db)).size === DEFAULT_PARTITIONS, { what: 'every partition held' })
  t.ok([...(await partitionLocks(db)).values()].every((pids) => pids.length === 1 && pids[0] === s.lockConnectionPid),
    'a single node holds every partition, each once, on its lock connection')
  t.equal((await row(db, 'locked'))!.partition, partitionOf('locked', DEFAULT_PARTITIONS), 'the row carries its partition')
  t.equal(p.runs.length, 0, 'stopped: no run')
  for (let cycle = 1; cycle <= 3; cycle++) {
    await s.startReaktor('locked')
    await waitFor(async () => (await reaktorLocks(db, 'locked')).length === 1, { what: 'the lock' })
    const [lock] = await reaktorLocks(db, 'locked')
    t.equal(lock.granted, true, `cycle ${cycle}: granted`)
    t.equal(lock.pid, s.lockConnectionPid, 'held by the scheduler\'s dedicated connection')
    const pooled = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(db)
    t.not(lock.pid, pooled.rows[0].pid, 'not by a pooled connection')
    // Many reconciles, repeated starts and notifications must never take the held lock again:
    // session locks stack, and one unlock would then leave it held (checked below by a handover).
    for (let i = 0; i < 5; i++) {
      s.requestReconcile()
      await s.startReaktor('locked')
      await sql`select pg_notify('reaktor_polling', 'locked')`.execute(db)
    }
    const runs = p.runs.length
    await waitFor(() => p.runs.length >= runs + 2, { what: 'more runs' })
    t.same(s.ownedReaktorIds(), ['locked'])
    await waitFor(async () => (await row(db, 'locked'))!.owner === 'node-a', { what: 'the owner in the row' })
    t.equal((await s.status('locked')).owner, 'node-a', 'status names the holder of the partition')
    await s.stopReaktor('locked')
    const stoppedAt = p.runs.length
    await waitFor(() => s.ownedReaktorIds().length === 0, { what: 'the runner to be let go' })
    t.equal((await s.status('locked')).owner, null, 'a stopped reaktor has no owner')
    t.ok(p.runs.length <= stoppedAt, `cycle ${cycle}: no run after the stop was acknowledged`)
  }
  // A second node: the first hands half of the partitions over, each with ONE unlock. Were any
  // held twice, it would stay locked and the spread would never settle.
  const b = scheduler(t, db, url, { nodeId: 'node-b', reaktors: registry([probe('locked', () => false, { interval: '100ms' }).registration]) })
  await b.start()
  await waitFor(async () => {
    const holders = [...(await partitionLocks(db)).values()]
    const onA = holders.filter((pids) => pids[0] === s.lockConnectionPid).length
    return holders.length === DEFAULT_PARTITIONS && holders.every((pids) => pids.length === 1) && onA === DEFAULT_PARTITIONS / 2
  }, { what: 'the partitions split 128/128' })
  t.same(s.heldPartitions().length, DEFAULT_PARTITIONS / 2, 'every handover released its lock with one unlock')
})

t.test('reaktors of one partition run on its holder and move together; the lock stays while any of them runs', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const ids = Array.from({ length: 2000 }, (_v, i) => `r${i}`)
  const target = partitionOf(ids[0], DEFAULT_PARTITIONS)
  const [a, b] = ids.filter((id) => partitionOf(id, DEFAULT_PARTITIONS) === target)
  t.ok(b !== undefined, `found two ids of partition ${target}: ${a}, ${b}`)
  const pa = probe(a, () => false, { interval: '100ms' })
  const pb = probe(b, () => false, { interval: '100ms' })
  const s = scheduler(t, db, url, { reaktors: registry([pa.registration, pb.registration]) })
  await s.start()
  await s.startReaktor(a)
  await s.startReaktor(b)
  await waitFor(() => pa.runs.length >= 2 && pb.runs.length >= 2, { what: 'both to run' })
  t.same(s.ownedReaktorIds(), [a, b].sort())
  t.same(await reaktorLocks(db, a), await reaktorLocks(db, b), 'one lock for both')
  await s.stopReaktor(a)
  await waitFor(() => s.ownedReaktorIds().length === 1)
  const runs = pb.runs.length
  await waitFor(() => pb.runs.length >= runs + 2, { what: `${b} to keep running` })
  t.equal((await reaktorLocks(db, b))[0]?.pid, s.lockConnectionPid, 'the partition stays held while the other id runs')
  await s.startReaktor(a)
  // A second node; then the first leaves: both move to it together.
  const qa = probe(a, () => false, { interval: '100ms' })
  const qb = probe(b, () => false, { interval: '100ms' })
  const s2 = scheduler(t, db, url, { nodeId: 'node-b', reaktors: registry([qa.registration, qb.registration]) })
  await s2.start()
  await s.stop()
  await waitFor(() => qa.runs.length >= 2 && qb.runs.length >= 2, { what: 'both to run on node b' })
  t.same(s2.ownedReaktorIds(), [a, b].sort(), 'both moved with their partition')
  t.equal(Math.max(pa.maxActive(), pb.maxActive(), qa.maxActive(), qb.maxActive()), 1, 'never two runs of one reaktor at once')
})

t.test('fencing: when the lock connection is killed every run aborts at once, then the node recovers', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const log = memoryLogger()
  const blocked = probe('blocked', async (_n, ctx) => await untilAborted(ctx.signal), { interval: '100ms', autoStart: true })
  const ticking = probe('ticking', () => false, { interval: '100ms', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([blocked.registration, ticking.registration]), log })
  await s.start()
  await waitFor(() => blocked.runs.length === 1 && ticking.runs.length >= 1, { what: 'runs' })
  const oldPid = s.lockConnectionPid!
  await sql`select pg_terminate_backend(${oldPid})`.execute(db)
  await waitFor(() => blocked.runs[0].end !== undefined, { what: 'the in-flight run to be aborted' })
  t.type(blocked.runs[0].aborted, RunStoppedError)
  t.match(String(blocked.runs[0].aborted), /lock connection lost/)
  t.ok(log.lines.some((l) => l.level === 'error' && /fencing/.test(l.msg ?? '')), 'the fencing is logged')
  await waitFor(() => s.lockConnectionPid !== undefined && s.lockConnectionPid !== oldPid, { what: 'a new lock connection' })
  await waitFor(async () => {
    const locks = [...await reaktorLocks(db, 'blocked'), ...await reaktorLocks(db, 'ticking')]
    return locks.length === 2 && locks.every((l) => l.pid === s.lockConnectionPid && l.granted)
  }, { what: 'the locks taken again on the new connection' })
  await waitFor(() => blocked.runs.length === 2, { what: 'the run to start again' })
  const ticks = ticking.runs.length
  await waitFor(() => ticking.runs.length >= ticks + 2, { what: 'the other reaktor to run again' })
  t.equal(blocked.maxActive(), 1, 'the aborted and the new run never overlapped')
})

t.test('cold start vs joining a live cluster; takeover continues from the stored nextRun', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const membership = async (): Promise<Array<{ mode: string }>> => (await sql<{ mode: string }>`
    select mode from pg_locks where locktype = 'advisory' and classid = ${CLUSTER_LOCK_NAMESPACE}::bigint::oid and objid = 0 and objsubid = 2
      and database = (select oid from pg_database where datname = current_database())
  `.execute(db)).rows

  const onA = probe('shared', () => false, { interval: '1500ms', autoStart: true })
  const manualA = probe('manual', () => false, { interval: '100ms' })
  const a = scheduler(t, db, url, { nodeId: 'node-a', reaktors: registry([onA.registration, manualA.registration]) })
  await a.start()
  t.equal(a.coldStart, true, 'the first node sees a cold start')
  t.same(await membership(), [{ mode: 'ShareLock' }], 'it holds the membership lock shared')
  await a.startReaktor('manual')
  await waitFor(() => onA.runs.length === 1 && manualA.runs.length >= 1)
  await waitFor(async () => (await row(db, 'shared'))?.last_run !== null, { what: 'the run result flushed' })
  const before = await db.selectFrom('polling_reaktors').selectAll().orderBy('reaktor_id').execute()

  // Node b: the same reaktors, but autoStart false for "manual" would stop it at a cold start.
  const onB = probe('shared', () => false, { interval: '1500ms', autoStart: true })
  const manualB = probe('manual', () => false, { interval: '100ms', autoStart: false })
  const onlyB = probe('only-b', () => false, { interval: '100ms', autoStart: true })
  const b = scheduler(t, db, url, { nodeId: 'node-b', reaktors: registry([onB.registration, manualB.registration, onlyB.registration]) })
  await b.start()
  t.equal(b.coldStart, false, 'a node joining a live cluster sees no cold start')
  t.same((await membership()).map((m) => m.mode), ['ShareLock', 'ShareLock'], 'both nodes are members')
  const after = await db.selectFrom('polling_reaktors').selectAll().where('reaktor_id', '!=', 'only-b').orderBy('reaktor_id').execute()
  t.same(after.map((r) => [r.reaktor_id, r.state, r.state_version]), before.map((r) => [r.reaktor_id, r.state, r.state_version]), 'the joining node changed no state')
  t.equal((await row(db, 'manual'))!.state, 'running', 'a running reaktor without autoStart keeps running')
  await waitFor(() => onlyB.runs.length >= 1, { what: 'node b to run its own reaktor' })
  t.same(a.ownedReaktorIds(), ['manual', 'shared'], 'a node only runs what its code registers')
  t.same(b.ownedReaktorIds(), ['only-b'])

  // Node a leaves: b takes over, continuing from the stored nextRun (no extra run at takeover).
  const storedNext = (await row(db, 'shared'))!.next_run.getTime()
  await a.stop()
  await waitFor(() => b.ownedReaktorIds().includes('shared'), { what: 'node b to take over' })
  await waitFor(() => onB.runs.length >= 1, { what: 'the first run on node b', timeoutMs: deadline(15_000) })
  t.ok(onB.runs[0].start >= storedNext - 10, `node b ran at the stored nextRun (${onB.runs[0].start - storedNext} ms after it), not at takeover`)
  await waitFor(async () => (await row(db, 'shared'))?.owner === 'node-b', { what: 'the owner column' })
  t.equal(onA.runs.length, 1)

  await b.stop()
  t.same(await membership(), [], 'no member left')
  const c = scheduler(t, db, url, { nodeId: 'node-c', reaktors: registry([manualB.registration]) })
  await c.start()
  t.equal(c.coldStart, true, 'with every node gone, the next boot is a cold start')
  t.equal((await row(db, 'manual'))!.state, 'stopped', 'and now the restart rules apply (running + autoStart false → stopped)')
})

t.test('after fencing, another node takes over and the fenced node\'s late flush does not undo the takeover', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const onA = probe('x', () => false, { interval: '1h', autoStart: true })
  const onB = probe('x', () => false, { interval: '1h', autoStart: true })
  // Both flush only at their stop, and a never reconnects during the test: b wins the lock while
  // a's result is still in memory, and a's flush lands after b's catch-up run and before b's flush.
  const a = scheduler(t, db, url, { nodeId: 'node-a', reaktors: registry([onA.registration]), flushIntervalMs: 3_600_000, reconnectMinMs: 3_600_000 })
  await a.start()
  await waitFor(() => onA.runs.length === 1 && onA.runs[0].end !== undefined)
  const b = scheduler(t, db, url, { nodeId: 'node-b', reaktors: registry([onB.registration]), flushIntervalMs: 3_600_000 })
  await b.start()
  t.equal(b.coldStart, false)
  t.equal(a.flushStats.flushes, 0, 'a\'s result is not flushed yet')
  await sql`select pg_terminate_backend(${a.lockConnectionPid!})`.execute(db)
  await waitFor(() => b.ownedReaktorIds().includes('x'), { what: 'node b to take over' })
  t.same(a.ownedReaktorIds(), [], 'the fenced node owns nothing')
  await waitFor(() => onB.runs.length === 1 && onB.runs[0].end !== undefined, { what: 'the catch-up run on node b' })
  const scheduled = (await row(db, 'x'))!.next_run.getTime()
  // The owner column as each statement leaves it (a's stop clears its own name after its flush).
  await sql`create table owner_writes (owner text)`.execute(db)
  await sql`create function record_owner () returns trigger language plpgsql as $$ begin insert into owner_writes values (new.owner); return new; end $$`.execute(db)
  await sql`create trigger record_owner after update of owner on polling_reaktors for each row execute function record_owner()`.execute(db)
  await a.stop()
  t.equal(a.flushStats.flushes, 1, 'node a\'s late flush')
  const late = (await row(db, 'x'))!
  t.equal(late.last_run.getTime(), onA.runs[0].lastRun, 'its result is recorded')
  t.equal(late.next_run.getTime(), scheduled, 'but not its next run: node b took the reaktor over')
  const owners = (await sql<{ owner: string | null }>`select owner from owner_writes`.execute(db)).rows.map((r) => r.owner)
  t.ok(owners.length >= 1, 'the flush wrote the row')
  t.notOk(owners.includes('node-a'), `nor its name as owner (${JSON.stringify(owners)})`)
  await b.stop()
  const stored = (await row(db, 'x'))!
  t.equal(stored.last_run.getTime(), onB.runs[0].lastRun, 'lastRun is node b\'s run')
  t.ok(stored.next_run.getTime() >= onB.runs[0].end! + 3_600_000 - 5, 'nextRun is node b\'s')
  t.equal(onB.runs.length, 1, 'exactly one catch-up run, no burst')
})

t.test('a stop acknowledged while a reconcile pass is taking the reaktor over: no run starts after it', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const racy = probe('racy', () => false, { interval: '100ms' })
  const elsewhere = probe('elsewhere', () => false, { interval: '100ms' })
  const witness = probe('witness', () => false, { interval: '100ms' })
  const acknowledged: string[] = []
  const s: Scheduler = scheduler(t, db, url, {
    reaktors: registry([racy.registration, elsewhere.registration, witness.registration]),
    // The race, widened on purpose: the stop commits and is answered in the middle of a pass.
    reconcileHook: async (step, ids) => {
      // Through this node, after the claim and before the runner would start.
      if (step === 'claimed' && ids.includes('racy') && !acknowledged.includes('racy')) {
        t.equal(await s.stopReaktor('racy'), true)
        acknowledged.push('racy')
      }
      // Through another node (a plain write), after the lock and before the claim.
      if (step === 'locked' && ids.includes('elsewhere') && !acknowledged.includes('elsewhere')) {
        t.equal((await writeStop(db, 'elsewhere', '100ms', new Date())).changed, true)
        acknowledged.push('elsewhere')
      }
    }
  })
  await s.start()
  await s.startReaktor('racy')
  await s.startReaktor('elsewhere')
  await waitFor(() => acknowledged.length === 2, { what: 'both stops acknowledged mid-pass' })
  await waitFor(() => !s.ownedReaktorIds().includes('racy') && !s.ownedReaktorIds().includes('elsewhere'), { what: 'no runner for either' })
  // Time for a run to start if one had been scheduled: the witness runs a few times meanwhile.
  await s.startReaktor('witness')
  await waitFor(() => witness.runs.length >= 3, { what: 'three witness runs' })
  t.equal(racy.runs.length, 0, 'no run from the pass that read the row before the stop (this node)')
  t.equal(elsewhere.runs.length, 0, 'nor from a claim that raced a stop written by another node')
  t.same(s.ownedReaktorIds(), ['witness'])
  t.equal((await row(db, 'racy'))!.state, 'stopped')
})

t.test('a node booting while every live node is momentarily disconnected (database restart) sees no false cold start', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const manualA = probe('manual', () => false, { interval: '100ms' })
  // a reconnects 1.2 to 1.8 s after losing its connection: b boots in that window.
  const a = scheduler(t, db, url, { nodeId: 'node-a', reaktors: registry([manualA.registration]), reconnectMinMs: 1500 })
  await a.start()
  await a.startReaktor('manual')
  await waitFor(async () => (await row(db, 'manual'))?.owner === 'node-a', { what: 'node a to own it' })
  await sql`select pg_terminate_backend(${a.lockConnectionPid!})`.execute(db)
  await waitFor(() => !a.connected, { what: 'node a disconnected' })

  const manualB = probe('manual', () => false, { interval: '100ms', autoStart: false })
  const b = scheduler(t, db, url, { nodeId: 'node-b', reaktors: registry([manualB.registration]), coldStartSettleMs: 6000 })
  const started = Date.now()
  await b.start()
  t.equal(b.coldStart, false, 'node a came back while node b waited: it joined a live cluster')
  // a is back within 1.8 s; the settle wait would take 6 s.
  t.ok(Date.now() - started < deadline(4000, { below: 6000 }), `and waited only until then (${Date.now() - started} ms)`)
  t.equal((await row(db, 'manual'))!.state, 'running', 'no restart rule applied: the operator\'s start stands')

  // A real crash of the whole cluster: the wait is bounded, then the restart rules apply.
  a.terminate()
  b.terminate()
  const c = scheduler(t, db, url, { nodeId: 'node-c', reaktors: registry([manualB.registration]), coldStartSettleMs: 500 })
  const booted = Date.now()
  await c.start()
  t.equal(c.coldStart, true, 'nobody came back: a cold start')
  t.ok(Date.now() - booted >= 450, `after the settle wait (${Date.now() - booted} ms)`)
  t.equal((await row(db, 'manual'))!.state, 'stopped', 'running + autoStart false → stopped')
})

t.test('a stop through another node aborts the last run of a partition being handed over', async (t) => {
  const { url, db } = await openTestDatabase(t)
  // Two running reaktors in different partitions with runs that end only when aborted: when a
  // second node joins, one partition is handed over and waits for its run to end on its own.
  const ids = ['hold-1', 'hold-2']
  t.not(partitionOf(ids[0], DEFAULT_PARTITIONS), partitionOf(ids[1], DEFAULT_PARTITIONS))
  const onA = ids.map((id) => probe(id, async (_n, ctx) => await untilAborted(ctx.signal), { interval: '100ms', autoStart: true }))
  const a = scheduler(t, db, url, { nodeId: 'node-a', reaktors: registry(onA.map((p) => p.registration)) })
  await a.start()
  await waitFor(() => onA.every((p) => p.runs.length === 1), { what: 'both runs in flight on node a' })
  const onB = ids.map((id) => probe(id, () => false, { interval: '100ms' }))
  const b = scheduler(t, db, url, { nodeId: 'node-b', reaktors: registry(onB.map((p) => p.registration)) })
  await b.start()
  await waitFor(() => a.ownedReaktorIds().length === 1, { what: 'node a to hand one partition over' })
  const leaving = ids.find((id) => !a.ownedReaktorIds().includes(id))!
  const run = onA[ids.indexOf(leaving)].runs[0]
  t.equal(run.aborted, undefined, 'a handover does not abort the run in flight')
  t.equal(await b.stopReaktor(leaving), true, 'stopped through node b')
  await waitFor(() => run.aborted !== undefined, { timeoutMs: deadline(2000), what: 'the handed-over run to be aborted by the stop' })
  t.type(run.aborted, RunStoppedError)
  await waitFor(async () => (await reaktorLocks(db, leaving))[0]?.pid === b.lockConnectionPid, { what: 'the partition to reach node b' })
  t.equal(onB[ids.indexOf(leaving)].runs.length, 0, 'and the stopped reaktor does not run there')
})

t.test('a start or stop whose notification was lost is picked up by the periodic rows check', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const quiet = probe('quiet', () => false, { interval: '100ms' })
  const s = scheduler(t, db, url, { reaktors: registry([quiet.registration]), rowsCheckMs: 1000 })
  await s.start()
  // Written as a start would be, but without its NOTIFY (as if the notification had been lost).
  await sql`update polling_reaktors set state = 'running', next_run = now(), state_version = state_version + 1 where reaktor_id = 'quiet'`.execute(db)
  await waitFor(() => quiet.runs.length >= 1, { timeoutMs: deadline(5000), what: 'the periodic check to start it' })
  await sql`update polling_reaktors set state = 'stopped', next_run = null, state_version = state_version + 1 where reaktor_id = 'quiet'`.execute(db)
  await waitFor(() => s.ownedReaktorIds().length === 0, { timeoutMs: deadline(5000), what: 'the periodic check to stop it' })
  const runs = quiet.runs.length
  await waitFor(() => s.heldPartitions().length === DEFAULT_PARTITIONS, { what: 'the partitions still held' })
  t.ok(quiet.runs.length <= runs + 1, 'no runs after the stop was seen')
})
