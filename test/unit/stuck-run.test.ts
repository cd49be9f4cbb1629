import t from 'tap'
import { sql, type Kysely } from 'kysely'
import type { Database } from '../../src/db/schema.js'
import type { TestContext } from '../helpers/test-context.js'
import { bound, deadline, waitFor } from '../helpers/timing.js'
import { memoryLogger } from '../helpers/log.js'
import { DEFAULT_PARTITIONS, partitionOf as partitionIn } from '../../src/scheduler/ownership/partitions.js'
import { FAST_SCHEDULER, openTestDatabase, probe, reaktorLocks, registry, row, scheduler, untilAborted, type TestScheduler } from '../helpers/scheduler.js'

const partitionOf = (id: string): number => partitionIn(id, DEFAULT_PARTITIONS)

/**
 * A run whose aktor ignores its signal past `timeout` keeps its reaktor blocked (runs never
 * overlap): the status must say so from the timeout on, not look healthy until the run settles.
 */

const TIMEOUT_MS = 150
/** The failure is written by the next batched flush after the timeout. */
const RECORDED_WITHIN_MS = bound(TIMEOUT_MS + FAST_SCHEDULER.flushIntervalMs, 'second')

/** A started scheduler with `deaf`: its run 1 ignores its signal and settles when the test calls `release`; later runs return false at once. */
async function stuckReaktor (t: TestContext): Promise<{ db: Kysely<Database>, s: TestScheduler, deaf: ReturnType<typeof probe>, release: (value: boolean) => void }> {
  const { url, db } = await openTestDatabase(t)
  let release = (_value: boolean): void => {}
  const settled = new Promise<boolean>((resolve) => { release = resolve })
  const deaf = probe('deaf', async (n) => n === 1 ? await settled : false, { interval: '100ms', timeout: `${TIMEOUT_MS}ms`, autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([deaf.registration]), log: memoryLogger() })
  await s.start()
  return { db, s, deaf, release }
}

t.test('a run that ignores its signal past its timeout is recorded as failed at once and shown blocked until it settles', async (t) => {
  const { db, s, deaf, release } = await stuckReaktor(t)
  await waitFor(() => deaf.runs.length === 1, { what: 'the first run' })
  const startedAt = deaf.runs[0].start

  const blocked = await waitFor(async () => {
    const status = await s.status('deaf')
    return status.consecutiveFailures > 0 ? status : undefined
  }, { timeoutMs: RECORDED_WITHIN_MS, intervalMs: 10, what: 'the timed-out run recorded as a failure' })
  t.ok(Date.now() - startedAt < RECORDED_WITHIN_MS, `recorded ${Date.now() - startedAt} ms after the run started (timeout ${TIMEOUT_MS} ms)`)
  t.equal(deaf.runs[0].end, undefined, 'while the run is still in flight')
  t.ok(deaf.runs[0].context.signal.aborted, 'its signal was aborted at the timeout')
  t.match(blocked, { state: 'running', blocked: true, consecutiveFailures: 1, nextRun: null, owner: 'node-a' }, 'blocked, counted, and not scheduled')
  t.match(blocked.lastError, /timed out after 150 ms.*still settling/, `lastError says so: ${String(blocked.lastError)}`)
  t.equal(blocked.lastRun, new Date((await row(db, 'deaf'))!.last_run).toISOString(), 'lastRun is the start of the stuck run')

  // Stop and start: the stuck run still blocks the reaktor, and the status keeps saying so.
  t.equal(await s.stopReaktor('deaf'), true)
  t.match(await s.status('deaf'), { state: 'stopped', blocked: true }, 'stopped, the run still settling')
  t.equal(await s.startReaktor('deaf'), true)
  await waitFor(async () => (await s.status('deaf')).owner !== null, { what: 'the owner after the start' })
  const restarted = await s.status('deaf')
  t.match(restarted, { state: 'running', blocked: true, owner: 'node-a', consecutiveFailures: 1 }, 'running again, but blocked by the stuck run')
  t.equal(deaf.runs.length, 1, 'and no other run started')

  // The run settles: the block is gone, the reaktor runs again and its success resets the count.
  release(true)
  await waitFor(() => deaf.runs.length >= 2 && deaf.runs[1].end !== undefined, { what: 'the next run after the stuck one settled' })
  t.ok(deaf.runs[1].start >= deaf.runs[0].end!, 'the next run started only after the stuck one settled')
  const healthy = await waitFor(async () => {
    const status = await s.status('deaf')
    return status.lastRun !== null && Date.parse(status.lastRun) >= deaf.runs[0].end! ? status : undefined
  }, { timeoutMs: deadline(5000), what: 'the next run recorded' })
  t.match(healthy, { state: 'running', blocked: false, consecutiveFailures: 0 })
  t.match(healthy.lastError, /timed out after 150 ms; it settled \d+ ms after it started/, 'the last failure stays on record, as it ended (not "still settling")')
  t.equal(deaf.maxActive(), 1, 'never two runs at once')
})

t.test('a run that honours its signal at the timeout counts once, and is never shown blocked', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const polite = probe('polite', async (n, ctx) => n === 1 ? await untilAborted(ctx.signal) : false, { interval: '1h', timeout: `${TIMEOUT_MS}ms`, autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([polite.registration]), log: memoryLogger() })
  await s.start()
  await waitFor(() => polite.runs.length >= 1 && polite.runs[0].end !== undefined, { what: 'the first run to time out' })
  const status = await waitFor(async () => {
    const st = await s.status('polite')
    return st.consecutiveFailures > 0 ? st : undefined
  }, { timeoutMs: RECORDED_WITHIN_MS, what: 'the failure recorded' })
  t.match(status, { blocked: false, consecutiveFailures: 1 }, 'one failure, not blocked')
  t.match(status.lastError, /timed out after 150 ms/)
  t.notMatch(status.lastError, /still settling/, 'it settled with the abort')
})

t.test('shutdown: a run still in flight after the grace keeps its partition locked until it settles; the others are released at the grace', async (t) => {
  const { url, db } = await openTestDatabase(t)
  let release = (_value: boolean): void => {}
  const settled = new Promise<boolean>((resolve) => { release = resolve })
  const deaf = probe('deaf', async () => await settled, { interval: '1h', autoStart: true })
  const polite = probe('polite', async (_n, ctx) => await untilAborted(ctx.signal), { interval: '1h', autoStart: true })
  const log = memoryLogger()
  const s = scheduler(t, db, url, { reaktors: registry([deaf.registration, polite.registration]), log, shutdownGraceMs: 300 })
  await s.start()
  await waitFor(() => deaf.runs.length === 1 && polite.runs.length === 1, { what: 'both runs in flight' })
  const lockPid = s.lockConnectionPid
  t.ok(lockPid, 'the lock connection is up')
  t.same((await reaktorLocks(db, 'deaf')).map((l) => l.pid), [lockPid], 'deaf\'s partition is locked by this node')
  t.not(partitionOf('deaf'), partitionOf('polite'), 'two partitions')

  await s.stop()
  t.ok(polite.runs[0].end !== undefined && deaf.runs[0].end === undefined, 'stop returned after the grace, the deaf run still in flight')
  t.same((await reaktorLocks(db, 'deaf')).map((l) => l.pid), [lockPid], 'its partition is still locked')
  t.same(await reaktorLocks(db, 'polite'), [], 'the other partition was released')
  t.ok(log.lines.some((l) => l.level === 'warn' && /stay locked until those runs settle/.test(l.msg ?? '')), 'a warning says so')

  release(false)
  await waitFor(async () => (await reaktorLocks(db, 'deaf')).length === 0, { timeoutMs: deadline(5000), what: 'the lock released once the run settled' })
  t.equal(deaf.runs.length, 1, 'nothing ran again')
})

t.test('a node that lost its lock session and took its partition back still shows the reaktor blocked by its stuck run', async (t) => {
  const { db, s, deaf, release } = await stuckReaktor(t)
  await waitFor(async () => (await s.status('deaf')).blocked, { timeoutMs: RECORDED_WITHIN_MS, intervalMs: 10, what: 'the run blocked' })
  const lockPid = s.lockConnectionPid!
  const { rows: [terminated] } = await sql<{ ok: boolean }>`select pg_terminate_backend(${lockPid}) as ok`.execute(db)
  t.ok(terminated.ok, 'lock session terminated')
  await waitFor(async () => s.lockConnectionPid !== undefined && s.lockConnectionPid !== lockPid &&
    (await reaktorLocks(db, 'deaf')).some((l) => l.pid === s.lockConnectionPid), { timeoutMs: deadline(10_000), what: 'the partition taken back on a new session' })
  t.match(await s.status('deaf'), { state: 'running', blocked: true }, 'still blocked: the stuck run still holds the reaktor back on this node')
  t.equal(deaf.runs.length, 1, 'and nothing else ran')

  release(true)
  await waitFor(() => deaf.runs.length >= 2, { timeoutMs: deadline(5000), what: 'the reaktor to run again' })
  await waitFor(async () => !(await s.status('deaf')).blocked, { timeoutMs: deadline(5000), what: 'the block lifted' })
  t.equal(deaf.maxActive(), 1, 'never two runs at once')
})
