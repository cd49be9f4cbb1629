/**
 * `POST /api/v1/polling/{id}/run` through the whole service: the answers (202, 409, 404, 401, 400),
 * the run it causes (seen by the aktor and in the status), requests coalescing while a run is in
 * flight, a stop that races with a request, the audit line of every request, and the OpenAPI entry.
 */
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import type { PollingReaktorRegistration } from '../../src/sdk/types.js'
import { ADMIN, ADMIN_ENV, loggedIn, type ApiCall } from '../helpers/auth.js'
import { buildLogged } from '../helpers/app.js'
import { deferred } from '../helpers/deferred.js'
import type { TestContext } from '../helpers/test-context.js'
import { bound, deadline, waitFor } from '../helpers/timing.js'
import { probe } from '../helpers/scheduler.js'

/** docs/operating.md ("Run now"): the owner hears the request's NOTIFY and starts the run within 50 ms. */
const RUN_STARTS_WITHIN_MS = bound(50, 'request')

interface Service { app: FastifyInstance, call: ApiCall, audit: () => Array<Record<string, any>> }

/** The service with these reaktors, logging at info into memory: `audit()` gives the audit objects written so far. */
async function service (t: TestContext, pollingReaktors: PollingReaktorRegistration[]): Promise<Service> {
  const { app, audits } = await buildLogged(t, ADMIN_ENV, [{ name: 'run-now-test', version: '1.0.0', pollingReaktors }])
  return { app, call: await loggedIn(app), audit: audits }
}

t.test('202: the owner runs it at once, the status shows the run, and each request writes one audit line', async (t) => {
  const p = probe('hourly', () => false, { interval: '1h', autoStart: true })
  const { app, call, audit } = await service(t, [p.registration])
  await waitFor(async () => p.runs[0]?.end !== undefined && (await call('GET', '/api/v1/polling/hourly/status')).body.lastRun !== null, { what: 'the first run in the status' })

  const sent = Date.now()
  const res = await call('POST', '/api/v1/polling/hourly/run')
  t.same(res, { statusCode: 202, body: { message: 'Polling reaktor "hourly": run requested' } })
  await waitFor(() => p.runs.length === 2, { timeoutMs: deadline(5000), what: 'the requested run' })
  t.ok(p.runs[1].start - sent <= RUN_STARTS_WITHIN_MS, `it started ${p.runs[1].start - sent} ms after the request was sent, not an hour later`)
  const status = await waitFor(async () => {
    const body = (await call('GET', '/api/v1/polling/hourly/status')).body
    return Date.parse(body.lastRun) === p.runs[1].lastRun ? body : undefined
  }, { what: 'the requested run in the status' })
  t.match(status, { state: 'running', owner: app.config.nodeId, lastError: null })
  t.ok(Date.parse(status.nextRun) - Date.parse(status.lastRun) >= 3_600_000, 'then the interval again')
  t.same(audit().filter((a) => a.action === 'polling.run'), [
    { action: 'polling.run', targets: ['hourly'], user: ADMIN.username, address: '127.0.0.1', node: app.config.nodeId, details: { requested: true } }
  ], 'one audit line: who asked to run what, where')
})

t.test('requests while a run is in flight coalesce into one run right after it', async (t) => {
  const first = deferred<boolean>()
  const p = probe('long', async (n) => n === 1 ? await first.promise : false, { interval: '1h', autoStart: true })
  const { call, audit } = await service(t, [p.registration])
  await waitFor(() => p.runs.length === 1, { what: 'the first run in flight' })
  const answers = await Promise.all(Array.from({ length: 5 }, async () => await call('POST', '/api/v1/polling/long/run')))
  t.same(answers.map((a) => a.statusCode), [202, 202, 202, 202, 202])
  t.equal(audit().filter((a) => a.action === 'polling.run').length, 5, 'one audit line per request')
  first.resolve(false)
  await waitFor(() => p.runs[1]?.end !== undefined, { timeoutMs: deadline(5000), what: 'the extra run' })
  t.ok(p.runs[1].start - p.runs[0].end! <= RUN_STARTS_WITHIN_MS, `right after the run in flight (${p.runs[1].start - p.runs[0].end!} ms)`)
  // The extra run's result is in the status once flushed: by then a third run, had one been
  // queued behind it, would long have started (it would start at once, not an hour later).
  await waitFor(async () => Date.parse((await call('GET', '/api/v1/polling/long/status')).body.lastRun) === p.runs[1].lastRun, { what: 'the extra run in the status' })
  t.equal(p.runs.length, 2, 'five requests, one extra run')
  t.equal(p.maxActive(), 1, 'never two runs at once')
})

t.test('a stop after a request wins: the run in flight is aborted and nothing runs after the stop', async (t) => {
  const p = probe('racing', async (_n, ctx) => await new Promise<boolean>((resolve) => ctx.signal.addEventListener('abort', () => resolve(true), { once: true })), { interval: '1h', autoStart: true })
  const { app, call } = await service(t, [p.registration])
  await waitFor(() => p.runs.length === 1, { what: 'the first run in flight' })
  t.equal((await call('POST', '/api/v1/polling/racing/run')).statusCode, 202)
  t.equal((await call('POST', '/api/v1/polling/racing/stop')).statusCode, 200)
  await waitFor(() => p.runs[0].end !== undefined, { what: 'the run in flight to be aborted' })
  // Stopped: every run of it is over, and its row says so (read by the same node that stopped it).
  await waitFor(() => !app.scheduler.ownedReaktorIds().includes('racing'), { what: 'the runner to be let go' })
  t.match((await call('GET', '/api/v1/polling/racing/status')).body, { state: 'stopped', nextRun: null })
  t.equal(p.runs.length, 1, 'the requested run never started: the stop came first')
})

t.test('409 on a stopped reaktor, 404 on an unknown one, 401 without a token, 400 for a malformed id', async (t) => {
  const p = probe('idle', () => false, { interval: '1h' })
  const { app, call, audit } = await service(t, [p.registration])
  t.same(await call('POST', '/api/v1/polling/idle/run'), {
    statusCode: 409,
    body: { statusCode: 409, error: 'Conflict', message: 'Polling reaktor "idle" is stopped: start it first (POST /api/v1/polling/idle/start)' }
  })
  t.same(audit().filter((a) => a.action === 'polling.run'), [
    { action: 'polling.run', targets: ['idle'], user: ADMIN.username, address: '127.0.0.1', node: app.config.nodeId, details: { requested: false } }
  ], 'the refused request is audited too')
  t.same(await call('POST', '/api/v1/polling/nope/run'), {
    statusCode: 404, body: { statusCode: 404, error: 'Not Found', message: 'Polling reaktor "nope" is not registered' }
  })
  const anonymous = await app.inject({ method: 'POST', url: '/api/v1/polling/idle/run' })
  t.equal(anonymous.statusCode, 401)
  t.same(Object.keys(anonymous.json()).sort(), ['error', 'message', 'statusCode'])
  for (const id of ['%00', 'a%00b', '%ED%A0%80']) {
    const res = await call('POST', `/api/v1/polling/${id}/run`)
    t.equal(res.statusCode, 400, `${id}: 400`)
    t.same(Object.keys(res.body).sort(), ['error', 'message', 'statusCode'])
  }
  t.equal(p.runs.length, 0, 'nothing ran')
  t.equal(audit().filter((a) => a.action === 'polling.run').length, 1, 'only the request on a registered reaktor is audited')

  const doc = (await call('GET', '/api/v1/openapi.json')).body
  const operation = doc.paths['/api/v1/polling/{reaktorId}/run'].post
  t.same(operation.tags, ['polling'])
  t.ok(typeof operation.summary === 'string' && operation.summary.length > 0, 'with a summary')
  t.same(Object.keys(operation.responses).sort(), ['202', '400', '401', '404', '409', '500', '503'], 'every answer documented')
  t.same(operation.responses['409'].content['application/json'].schema, { $ref: '#/components/schemas/ErrorBody' })
})
