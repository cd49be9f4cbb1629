/**
 * Status, list and list pages are answered from memory (src/polling/status-cache.ts), yet a start or
 * stop acknowledged by ANY instance is visible in the very next status, on every instance.
 */
import t from 'tap'
import { performance } from 'node:perf_hooks'
import pg from 'pg'
import { sql } from 'kysely'
import type { FastifyInstance } from 'fastify'
import { ADMIN_ENV, loggedIn, type ApiCall } from '../helpers/auth.js'
import { build, metric } from '../helpers/app.js'
import type { TestContext } from '../helpers/test-context.js'
import { deadline, margin, waitFor } from '../helpers/timing.js'
import { createTestDatabase } from '../helpers/database.js'
import { FAST_SCHEDULER, probe } from '../helpers/scheduler.js'
import { PollingReads, type CachedAnswer } from '../../src/polling/reads.js'
import { StatusCache } from '../../src/polling/status-cache.js'

async function instance (t: TestContext, databaseUrl: string, nodeId: string): Promise<{ app: FastifyInstance, call: ApiCall }> {
  const app = await build(t, {
    env: { ...ADMIN_ENV, NODE_ID: nodeId },
    databaseUrl,
    apps: [{ name: 'status-cache-test', version: '1.0.0', pollingReaktors: [probe('cached', () => false, { interval: '1h' }).registration] }],
    scheduler: FAST_SCHEDULER
  })
  return { app, call: await loggedIn(app) }
}

t.test('a start or stop acknowledged by another instance shows at once in status and list', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const a = await instance(t, databaseUrl, 'node-a')
  const b = await instance(t, databaseUrl, 'node-b')
  const status = async (): Promise<string> => (await a.call('GET', '/api/v1/polling/cached/status')).body.state
  const listed = async (): Promise<string> => (await a.call('GET', '/api/v1/polling')).body.pollingReaktors[0].state
  // A filtered page is cut from the same cached read: it must be as fresh.
  const runningPage = async (): Promise<{ ids: string[], running: number }> => {
    const { body } = await a.call('GET', '/api/v1/polling?state=running&q=CACH&limit=10')
    return { ids: body.pollingReaktors.map((s: { reaktorDefinitionId: string }) => s.reaktorDefinitionId), running: body.counts.running }
  }

  t.equal(await status(), 'stopped')
  const hits = async (): Promise<number> => await metric(a.app, 'reaktor_status_cache_hits_total')
  const hitsBefore = await hits()
  t.equal(await status(), 'stopped')
  t.equal(await hits(), hitsBefore + 1, 'the second status on A is answered from its cache')

  // Many rounds: each time A has just cached the opposite state when B acknowledges the change.
  for (let round = 0; round < 20; round++) {
    const start = round % 2 === 0
    const expected = start ? 'running' : 'stopped'
    await status()
    await listed()
    await runningPage()
    const res = await b.call('POST', `/api/v1/polling/cached/${start ? 'start' : 'stop'}`)
    t.equal(res.statusCode, 200)
    if (res.statusCode !== 200) break
    // No waiting: the answer of B is acknowledged, so A must show it now.
    t.equal(await status(), expected, `round ${round}: status on A right after B's ${start ? 'start' : 'stop'}`)
    t.equal(await listed(), expected, `round ${round}: list on A too`)
    t.same(await runningPage(), start ? { ids: ['cached'], running: 1 } : { ids: [], running: 0 }, `round ${round}: and a page of the running ones`)
  }
  const hitsAfter = await hits()
  t.ok(hitsAfter > hitsBefore + 20, `A answered from its cache in between (${hitsAfter - hitsBefore} hits, ${await metric(a.app, 'reaktor_status_cache_reads_total')} reads)`)

  // What no notification announces (a batch of run results) shows after at most the short max-age
  // (100 ms), well within a second.
  // (A run a day from now: no real batch of the two schedulers overwrites it.)
  await sql`update polling_reaktors set last_run = now() + interval '1 day', last_error = 'written by a batch', consecutive_failures = 7 where reaktor_id = 'cached'`.execute(a.app.db)
  const written = Date.now()
  await waitFor(async () => (await a.call('GET', '/api/v1/polling/cached/status')).body.consecutiveFailures === 7, { timeoutMs: deadline(2000), intervalMs: 5, what: 'the run result in the status' })
  t.ok(Date.now() - written <= deadline(1000), `a run result shows within the max-age (${Date.now() - written} ms)`)
})

t.test('without its listening connection, status reads the database; the cache comes back with it', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const { app, call } = await instance(t, databaseUrl, 'node-a')
  const status = async (): Promise<string> => (await call('GET', '/api/v1/polling/cached/status')).body.state
  t.equal(await status(), 'stopped')
  await sql`select pg_terminate_backend(pid) from pg_stat_activity where application_name like 'reaktor-status%' and datname = current_database()`.execute(app.db)
  // A state change that sends no notification (nobody could tell the listener about it) is seen
  // by the very next status: whether the dead connection has been noticed yet or not, or even
  // replaced already (a reconnect starts from an empty cache), nothing unconfirmed is served.
  await sql`update polling_reaktors set state = 'running', next_run = now() + interval '1 hour' where reaktor_id = 'cached'`.execute(app.db)
  t.equal(await status(), 'running', 'the database decides while the listener is gone')
  // Once the listener is back, answers are cached again.
  await waitFor(async () => {
    await status()
    const before = await metric(app, 'reaktor_status_cache_hits_total')
    await status()
    return await metric(app, 'reaktor_status_cache_hits_total') > before
  }, { timeoutMs: deadline(10_000), what: 'the cache to be used again after a reconnect' })
})

t.test('a list read that takes longer than the max-age is still served from memory for the max-age after it answered', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const { app } = await instance(t, databaseUrl, 'node-a')
  // Long enough to read the next page well within it on a busy machine.
  const MAX_AGE_MS = margin('second')
  const cache = new StatusCache<CachedAnswer>({ url: databaseUrl, applicationName: 'reaktor-status slow-read-test', log: app.log, maxAgeMs: MAX_AGE_MS })
  await cache.start()
  t.teardown(async () => await cache.stop())
  const reads = new PollingReads({ db: app.db, reaktors: app.apps.pollingReaktors, minIntervalMs: 50 }, cache)
  const serializer = { serialize: (value: unknown) => JSON.stringify(value) }
  const page = async (): Promise<unknown> => JSON.parse(await reads.listPageJson({ state: 'stopped', sort: 'id', order: 'asc', limit: 10, offset: 0 }, serializer))

  // The read waits behind a table lock for longer than the max-age (thousands of reaktors on busy cores).
  const holder = new pg.Client({ connectionString: databaseUrl })
  await holder.connect()
  t.teardown(async () => await holder.end())
  await holder.query('begin')
  await holder.query('lock table polling_reaktors in access exclusive mode')
  const slow = page()
  // (Asked on another connection: inside the holder's transaction the statistics would not change.)
  const waiting = sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like '%from polling_reaktors as p%'`
  await waitFor(async () => (await waiting.execute(app.db)).rows[0].n > 0, { what: 'the list read to wait for the lock' })
  const blockedAt = performance.now()
  await waitFor(() => performance.now() - blockedAt > MAX_AGE_MS * 1.5, { what: 'the read to be older than the max-age', intervalMs: 50 })
  await holder.query('rollback')
  t.match(await slow, { pollingReaktors: [{ reaktorDefinitionId: 'cached' }], total: 1 })
  t.same({ reads: reads.reads, hits: reads.hits }, { reads: 1, hits: 0 })
  // Well within the max-age after it answered.
  t.match(await page(), { total: 1 })
  t.same({ reads: reads.reads, hits: reads.hits }, { reads: 1, hits: 1 }, 'the next page comes from memory, not from another read')
})
