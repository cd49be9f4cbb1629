/**
 * The example apps of reaktor-apps/ over HTTP, as an operator and the drain-demo UI use them:
 * log in, fill the queue through the aktor endpoint, start the drain reaktor, watch it drain.
 */
import t from 'tap'
import { ADMIN_ENV, loggedIn } from '../helpers/auth.js'
import { build } from '../helpers/app.js'
import { bound, waitFor } from '../helpers/timing.js'
import { EXAMPLE_APPS_DIR } from '../helpers/paths.js'

t.test('drain-demo: enqueue over the aktor endpoint, start, drain, stop', async (t) => {
  const app = await build(t, { env: { REAKTOR_APPS_DIR: EXAMPLE_APPS_DIR, REAKTOR_SETTING_DRAIN_DEMO_WORKMS: '0', ...ADMIN_ENV } })
  const call = await loggedIn(app)

  const listed = await call('GET', '/api/v1/polling')
  t.match(listed.body.pollingReaktors.map((r: { reaktorDefinitionId: string }) => r.reaktorDefinitionId), ['drain-demo', 'heartbeat'])

  const before = await call('GET', '/api/v1/polling/drain-demo/status')
  t.match(before.body, { state: 'stopped', interval: '10s', autoStart: false, label: 'Drain demo' }, 'autoStart false: stopped after start-up')

  const bad = await call('POST', '/api/v1/aktor/drain-demo-enqueue', { count: 0 })
  t.equal(bad.statusCode, 400, 'the inputSchema rejects count 0')
  const enqueued = await call('POST', '/api/v1/aktor/drain-demo-enqueue', { count: 3 })
  t.equal(enqueued.statusCode, 200)
  t.match(enqueued.body, { added: 3, queueLength: 3 })

  const started = await call('POST', '/api/v1/polling/drain-demo/start')
  t.match(started.body, { message: /drain-demo/ })
  // Three runs: true, true, false. The queue empties without waiting the 10s interval in between.
  const queue = await waitFor(async () => {
    const { body } = await call('POST', '/api/v1/aktor/drain-demo-queue', {})
    return body.queueLength === 0 && body
  }, { what: 'the drain-demo queue to empty' })
  t.match(queue, { queueLength: 0, lastProcessed: { id: Number } })
  t.ok(queue.processed >= 3)

  // After the run that returned false the next run is one interval after it ended.
  const status = await waitFor(async () => {
    const { body } = await call('GET', '/api/v1/polling/drain-demo/status')
    return body.lastRun !== null && body.nextRun !== null && Date.parse(body.nextRun) - Date.parse(body.lastRun) >= 9_000 && body
  }, { what: 'drain-demo to wait its interval' })
  t.equal(status.state, 'running')
  // One interval (10 s) after the run ended: the run's own few milliseconds are in the margin.
  t.ok(Date.parse(status.nextRun) - Date.parse(status.lastRun) <= bound(10_000, 'second'), 'next run about 10s after the last')

  const stopped = await call('POST', '/api/v1/polling/drain-demo/stop')
  t.match(stopped.body, { message: /drain-demo/ })
  t.match((await call('GET', '/api/v1/polling/drain-demo/status')).body, { state: 'stopped' })
})

t.test('heartbeat starts by itself and runs', async (t) => {
  const app = await build(t, { env: { REAKTOR_APPS_DIR: EXAMPLE_APPS_DIR, ...ADMIN_ENV } })
  const call = await loggedIn(app)
  const status = await waitFor(async () => {
    const { body } = await call('GET', '/api/v1/polling/heartbeat/status')
    return body.lastRun !== null && body
  }, { what: 'the first heartbeat' })
  t.match(status, { state: 'running', interval: '30s', autoStart: true, lastError: null, consecutiveFailures: 0 })
})
