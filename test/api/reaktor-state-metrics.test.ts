/**
 * The per-reaktor gauges of /metrics on one node (the cluster side: test/cluster/metrics-cluster.test.ts):
 * read from the stored rows of the partitions this node holds; what a scrape shows while the
 * database answers nothing; and the duration metrics really in seconds.
 */
import t from 'tap'
import { performance } from 'node:perf_hooks'
import { setTimeout as delay } from 'node:timers/promises'
import pg from 'pg'
import type { FastifyInstance } from 'fastify'
import { build, metric } from '../helpers/app.js'
import { ADMIN_ENV, loggedIn } from '../helpers/auth.js'
import { bound, deadline, waitFor } from '../helpers/timing.js'
import { createTestDatabase } from '../helpers/database.js'
import { byReaktor, parseMetrics, type Sample } from '../helpers/metrics.js'
import { freeze, ownPostgres } from '../helpers/own-postgres.js'
import { FAST_SCHEDULER, probe } from '../helpers/scheduler.js'
import { STATE_READ_TIMEOUT_MS } from '../../src/metrics/reaktor-state.js'
import { partitionOf } from '../../src/scheduler/ownership/partitions.js'

const LAST_SUCCESS = 'reaktor_polling_last_success_timestamp_seconds'
const FAILURES = 'reaktor_polling_consecutive_failures'
const RUNNING = 'reaktor_polling_running'
const GAUGES = [LAST_SUCCESS, FAILURES, RUNNING]

async function scrape (app: FastifyInstance): Promise<Sample[]> {
  const res = await app.inject({ method: 'GET', url: '/metrics' })
  if (res.statusCode !== 200) throw new Error(`/metrics answered ${res.statusCode}`)
  return parseMetrics(res.body)
}

/** Each gauge's values by reaktor. */
function gauges (samples: Sample[]): Record<string, Record<string, number>> {
  return Object.fromEntries(GAUGES.map((g) => [g, Object.fromEntries(byReaktor(samples, g))]))
}

t.test('one node: every registered reaktor from its stored row; unregistered rows are not exported', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const sql = new pg.Pool({ connectionString: databaseUrl, max: 2 })
  t.teardown(async () => await sql.end())
  const ok = probe('rs-ok', () => false, { interval: '1h', autoStart: true })
  const failing = probe('rs-fail', () => { throw new Error('always fails') }, { interval: '100ms', autoStart: true })
  const stopped = probe('rs-stopped', () => false, { interval: '1h' })
  const app = await build(t, {
    databaseUrl, env: ADMIN_ENV, scheduler: FAST_SCHEDULER,
    apps: [{ name: 'rs-app', version: '1.0.0', pollingReaktors: [ok.registration, failing.registration, stopped.registration] }]
  })
  const partitions = app.scheduler.partitions
  await waitFor(async () => await metric(app, 'reaktor_polling_partitions_held') === partitions, { what: 'the only node to hold every partition' })

  // A row of an id no app registers any more (in a partition this node holds) and a known success time.
  await sql.query(`insert into polling_reaktors (reaktor_id, state, interval, partition, consecutive_failures) values ('rs-gone', 'running', '1m', $1, 7)`,
    [partitionOf('rs-gone', partitions)])
  await sql.query(`update polling_reaktors set last_success_at = '2026-11-27T10:00:00.250Z' where reaktor_id = 'rs-stopped'`)

  const failures = async (): Promise<number> =>
    (await sql.query<{ n: number }>(`select consecutive_failures as n from polling_reaktors where reaktor_id = 'rs-fail'`)).rows[0].n
  await waitFor(async () => await failures() >= 2, { what: 'rs-fail to have failed twice (stored)' })
  const before = await failures()
  const seen = gauges(await scrape(app))
  const after = await failures()

  for (const g of GAUGES) t.same(Object.keys(seen[g]).sort(), ['rs-fail', 'rs-ok', 'rs-stopped'], `${g}: the registered reaktors, each once, not rs-gone`)
  t.same(seen[RUNNING], { 'rs-fail': 1, 'rs-ok': 1, 'rs-stopped': 0 }, 'running: 1 while started, 0 while stopped')
  t.equal(seen[LAST_SUCCESS]['rs-stopped'], Date.parse('2026-11-27T10:00:00.250Z') / 1000, 'last success: the stored start, in epoch seconds')
  t.equal(seen[LAST_SUCCESS]['rs-fail'], 0, 'never succeeded: 0')
  t.ok(seen[FAILURES]['rs-fail'] >= before && seen[FAILURES]['rs-fail'] <= after,
    `consecutive failures: the stored count (${before} <= ${seen[FAILURES]['rs-fail']} <= ${after})`)
  t.equal(seen[FAILURES]['rs-ok'], 0)

  const call = await loggedIn(app)
  t.equal((await call('POST', '/api/v1/polling/rs-ok/stop')).statusCode, 200)
  t.equal(gauges(await scrape(app))[RUNNING]['rs-ok'], 0, 'stopped: running 0 in the next scrape')
  t.equal(await metric(app, 'reaktor_polling_state_read_failures_total'), 0, 'every read answered')
})

t.test('database frozen during a scrape: the scrape answers within its bound, with the values read before', async (t) => {
  const server = await ownPostgres(t)
  const failing = probe('fz-fail', () => { throw new Error('always fails') }, { interval: '100ms', autoStart: true })
  const idle = probe('fz-idle', () => false, { interval: '1h' })
  const app = await build(t, {
    databaseUrl: server.url, env: ADMIN_ENV, scheduler: FAST_SCHEDULER,
    apps: [{ name: 'fz-app', version: '1.0.0', pollingReaktors: [failing.registration, idle.registration] }]
  })
  const partitions = app.scheduler.partitions
  await waitFor(async () => await metric(app, 'reaktor_polling_partitions_held') === partitions, { what: 'the node to hold every partition' })
  const last = await waitFor(async () => {
    const g = gauges(await scrape(app))
    return g[FAILURES]['fz-fail'] >= 1 ? g : undefined
  }, { what: 'a stored failure of fz-fail in the metrics' })

  const thaw = await freeze(server)
  t.teardown(thaw)
  // The promise: a scrape waits at most STATE_READ_TIMEOUT_MS for the database.
  const within = bound(STATE_READ_TIMEOUT_MS, 'second')
  const timed = async (): Promise<{ ms: number, samples: Sample[] }> => {
    const start = performance.now()
    const samples = await scrape(app)
    return { ms: Math.round(performance.now() - start), samples }
  }
  const first = await timed()
  t.ok(first.ms >= STATE_READ_TIMEOUT_MS - 50 && first.ms <= within, `frozen: answered in ${first.ms} ms (waited for the database, bound ${within} ms)`)
  t.same(gauges(first.samples), last, 'the values of the last read, for the partitions still held')
  t.equal(first.samples.find((s) => s.name === 'reaktor_polling_state_read_failures_total')?.value, 1, 'the stale read is counted')
  // The first read is still out (the pool gives up on it after 6 s): the next scrape waits for it again, not for a second one.
  const second = await timed()
  t.ok(second.ms <= within, `frozen, again: answered in ${second.ms} ms (bound ${within} ms)`)
  t.same(gauges(second.samples), last)

  // The lock connection's ping goes unanswered too: the node fences itself, holds no partition, exports no reaktor.
  await waitFor(async () => await metric(app, 'reaktor_polling_partitions_held') === 0, { timeoutMs: deadline(15_000), what: 'the node to fence itself' })
  const fenced = await timed()
  t.ok(fenced.ms <= within, `fenced: answered in ${fenced.ms} ms`)
  t.same(gauges(fenced.samples), { [LAST_SUCCESS]: {}, [FAILURES]: {}, [RUNNING]: {} }, 'fenced: no per-reaktor series (no partition held)')

  thaw()
  // Reconnected, the node takes the partitions back a chunk at a time: wait for all of them.
  const back = await waitFor(async () => {
    const samples = await scrape(app)
    const g = gauges(samples)
    const held = samples.find((s) => s.name === 'reaktor_polling_partitions_held')?.value
    return held === partitions && g[FAILURES]['fz-fail'] > last[FAILURES]['fz-fail'] ? g : undefined
  }, { timeoutMs: deadline(30_000), what: 'every partition held again after the thaw, and fz-fail still counting' })
  t.same(back[RUNNING], { 'fz-fail': 1, 'fz-idle': 0 }, 'back after the thaw')
  t.comment(`measured: ${JSON.stringify({ frozenScrapeMs: first.ms, secondScrapeMs: second.ms, fencedScrapeMs: fenced.ms })}`)
})

t.test('durations are recorded in seconds: a 300 ms run and a 300 ms request', async (t) => {
  const slowRun = {
    reaktorDefinitionId: 'rs-slow', interval: '1h', autoStart: true,
    createReaktor: () => async () => { await delay(300); return false }
  }
  const slowAktor = { reaktorDefinitionId: 'rs-slow-aktor', createReaktor: () => async () => { await delay(300); return { ok: true } } }
  const app = await build(t, { env: ADMIN_ENV, scheduler: FAST_SCHEDULER, apps: [{ name: 'rs-slow-app', version: '1.0.0', pollingReaktors: [slowRun], reaktors: [slowAktor] }] })
  const call = await loggedIn(app)
  t.equal((await call('POST', '/api/v1/aktor/rs-slow-aktor', {})).statusCode, 200)

  const histogram = (samples: Sample[], name: string, match: Record<string, string>): { sum: number, count: number, buckets: Array<[number, number]> } | undefined => {
    const mine = samples.filter((s) => Object.entries(match).every(([k, v]) => s.labels[k] === v))
    const count = mine.find((s) => s.name === `${name}_count`)?.value
    const sum = mine.find((s) => s.name === `${name}_sum`)?.value
    if (count === undefined || sum === undefined || count === 0) return undefined
    const buckets = mine.filter((s) => s.name === `${name}_bucket`).map((s): [number, number] => [Number(s.labels.le === '+Inf' ? Infinity : s.labels.le), s.value])
    return { sum, count, buckets }
  }
  const check = (what: string, h: { sum: number, count: number, buckets: Array<[number, number]> }): void => {
    t.equal(h.count, 1, `${what}: one observation`)
    // In milliseconds the sum would be about 300.
    t.ok(h.sum >= 0.25 && h.sum <= 10, `${what}: sum ${h.sum} s lies between 0.25 and 10 (seconds, not milliseconds)`)
    t.ok(h.buckets.length >= 5, `${what}: ${h.buckets.length} buckets`)
    for (const [le, n] of h.buckets) t.equal(n, h.sum <= le ? 1 : 0, `${what}: bucket le=${le} counts it ${h.sum <= le ? 'once' : 'not'}`)
  }
  const run = await waitFor(async () => histogram(await scrape(app), 'reaktor_polling_run_duration_seconds', { reaktor: 'rs-slow' }), { what: 'the slow run to be observed' })
  check('reaktor_polling_run_duration_seconds', run)
  const request = histogram(await scrape(app), 'http_request_duration_seconds', { method: 'POST', route: '/api/v1/aktor/:aktorName', status_code: '200' })
  t.ok(request !== undefined, 'the slow request is observed')
  if (request !== undefined) check('http_request_duration_seconds', request)
})
