import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { ADMIN_ENV, loggedIn, type ApiCall } from '../helpers/auth.js'
import { build } from '../helpers/app.js'
import type { TestContext } from '../helpers/test-context.js'
import { deadline, waitFor } from '../helpers/timing.js'
import { FAST_SCHEDULER, probe, schedulerClock, work } from '../helpers/scheduler.js'
import type { PollingReaktorRegistration } from '../../src/sdk/types.js'
import type { SchedulerOverrides } from '../../src/plugins/scheduler.js'

const STATUS_KEYS = ['app', 'autoStart', 'blocked', 'consecutiveFailures', 'description', 'effectiveInterval', 'interval', 'label', 'lastDurationMs',
  'lastError', 'lastFailureAt', 'lastOutcome', 'lastRun', 'lastSuccessAt', 'nextRun', 'owner', 'reaktorDefinitionId', 'runningSince', 'state', 'updatedAt']

function isIso (value: unknown): boolean {
  return typeof value === 'string' && new Date(value).toISOString() === value
}

async function service (t: TestContext, pollingReaktors: PollingReaktorRegistration[], scheduler: SchedulerOverrides = FAST_SCHEDULER): Promise<{ app: FastifyInstance, call: ApiCall }> {
  const app = await build(t, { env: ADMIN_ENV, apps: [{ name: 'polling-test', version: '1.0.0', pollingReaktors }], scheduler })
  return { app, call: await loggedIn(app) }
}

t.test('start, stop and status: messages name the id, start/stop are idempotent, timestamps are ISO 8601 or null', async (t) => {
  const p = probe('report-sync', async (n) => { await work(5); return n < 3 }, { interval: '200ms', label: 'Report sync', description: 'Syncs reports' })
  const { app, call } = await service(t, [p.registration])

  let res = await call('GET', '/api/v1/polling/report-sync/status')
  t.equal(res.statusCode, 200)
  t.same(Object.keys(res.body).sort(), STATUS_KEYS)
  t.match(res.body, { reaktorDefinitionId: 'report-sync', app: 'polling-test', state: 'stopped', interval: '200ms', effectiveInterval: '200ms', lastRun: null, nextRun: null, label: 'Report sync', description: 'Syncs reports', autoStart: false, lastError: null, consecutiveFailures: 0, owner: null })
  t.ok(isIso(res.body.updatedAt))

  res = await call('POST', '/api/v1/polling/report-sync/start')
  t.same(res, { statusCode: 200, body: { message: 'Polling reaktor "report-sync" started successfully' } })
  res = await call('POST', '/api/v1/polling/report-sync/start')
  t.same(res, { statusCode: 200, body: { message: 'Polling reaktor "report-sync" is already running' } }, 'start on a running reaktor: 200, says so')

  // Three runs drain (true, true, false): lastRun and nextRun reflect them.
  await waitFor(async () => p.runs.length >= 3 && Date.parse((await call('GET', '/api/v1/polling/report-sync/status')).body.lastRun) === p.runs[2].lastRun, { what: 'the third run in the status' })
  res = await call('GET', '/api/v1/polling/report-sync/status')
  t.equal(res.body.state, 'running')
  t.ok(isIso(res.body.lastRun) && isIso(res.body.nextRun) && isIso(res.body.updatedAt), 'ISO 8601 timestamps')
  t.ok(Date.parse(res.body.nextRun) - Date.parse(res.body.lastRun) >= 200, 'after a false, nextRun is one interval after the run')
  t.equal(res.body.owner, app.config.nodeId, 'owner is the node running it')

  res = await call('POST', '/api/v1/polling/report-sync/stop')
  t.same(res, { statusCode: 200, body: { message: 'Polling reaktor "report-sync" stopped successfully' } })
  res = await call('POST', '/api/v1/polling/report-sync/stop')
  t.same(res, { statusCode: 200, body: { message: 'Polling reaktor "report-sync" is already stopped' } }, 'stop on a stopped reaktor: 200, says so')
  res = await call('GET', '/api/v1/polling/report-sync/status')
  t.match(res.body, { state: 'stopped', nextRun: null, owner: null })
  t.ok(isIso(res.body.lastRun), 'lastRun stays')
})

t.test('GET /api/v1/polling lists every registered reaktor, sorted by id', async (t) => {
  const { call } = await service(t, [
    probe('zeta', () => false, { interval: '1h' }).registration,
    probe('alpha', () => false, { interval: '2m', autoStart: true }).registration,
    probe('mid', () => false, { interval: '1s' }).registration
  ])
  const res = await call('GET', '/api/v1/polling')
  t.equal(res.statusCode, 200)
  t.same(Object.keys(res.body), ['pollingReaktors'])
  const list = res.body.pollingReaktors as Array<Record<string, unknown>>
  t.same(list.map((s) => s.reaktorDefinitionId), ['alpha', 'mid', 'zeta'])
  for (const s of list) t.same(Object.keys(s).sort(), STATUS_KEYS)
  t.match(list[0], { state: 'running', autoStart: true, interval: '2m', effectiveInterval: '2m' })
  t.match(list[2], { state: 'stopped', autoStart: false, interval: '1h', effectiveInterval: '1h', label: null, description: null })
})

t.test('unknown ids answer 404 with the error body; no token answers 401', async (t) => {
  const { app, call } = await service(t, [probe('known', () => false).registration])
  for (const [method, url] of [['POST', '/api/v1/polling/nope/start'], ['POST', '/api/v1/polling/nope/stop'], ['GET', '/api/v1/polling/nope/status']] as const) {
    const res = await call(method, url)
    t.same(res, { statusCode: 404, body: { statusCode: 404, error: 'Not Found', message: 'Polling reaktor "nope" is not registered' } }, `${method} ${url}`)
  }
  for (const [method, url] of [['POST', '/api/v1/polling/known/start'], ['POST', '/api/v1/polling/known/stop'], ['GET', '/api/v1/polling/known/status'], ['GET', '/api/v1/polling']] as const) {
    const res = await app.inject({ method, url })
    t.equal(res.statusCode, 401, `${method} ${url} without a token`)
    t.same(Object.keys(res.json()).sort(), ['error', 'message', 'statusCode'])
  }
  t.equal((await call('GET', '/api/v1/polling/known/status')).body.state, 'stopped', 'an unauthenticated start changed nothing')
})

t.test('the real 3 s minimum: an interval of 1s runs every 3s', async (t) => {
  const p = probe('heartbeat', () => false, { interval: '1s' })
  const { call } = await service(t, [p.registration], { reconcileIntervalMs: 200, flushIntervalMs: 50, now: schedulerClock })
  t.equal((await call('POST', '/api/v1/polling/heartbeat/start')).statusCode, 200)
  await waitFor(() => p.runs.length >= 2, { what: 'two runs', timeoutMs: deadline(15_000) })
  t.ok(p.runs[1].start - p.runs[0].end! >= 2990, `3 s between the runs (${p.runs[1].start - p.runs[0].end!} ms)`)
  const status = (await call('GET', '/api/v1/polling/heartbeat/status')).body
  t.match(status, { interval: '1s', effectiveInterval: '3s' })
  await waitFor(async () => Date.parse((await call('GET', '/api/v1/polling/heartbeat/status')).body.lastRun) === p.runs[1].lastRun, { what: 'the second run in the status' })
  const latest = (await call('GET', '/api/v1/polling/heartbeat/status')).body
  t.ok(Date.parse(latest.nextRun) - Date.parse(latest.lastRun) >= 3000, 'nextRun is 3 s after lastRun')
})

t.test('a stop through the API ends the run in flight', async (t) => {
  const p = probe('long', async (_n, ctx) => { await work(60_000, ctx.signal); return true }, { interval: '1s', autoStart: true })
  const { call } = await service(t, [p.registration])
  await waitFor(() => p.runs.length === 1, { what: 'the run' })
  t.equal((await call('POST', '/api/v1/polling/long/stop')).statusCode, 200)
  await waitFor(() => p.runs[0].end !== undefined, { what: 'the run to end' })
  t.ok(p.runs[0].context.signal.aborted, 'its signal was aborted')
  t.equal((await call('GET', '/api/v1/polling/long/status')).body.state, 'stopped')
})
