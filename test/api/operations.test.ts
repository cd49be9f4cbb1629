import t from 'tap'
import { build } from '../helpers/app.js'
import { waitFor } from '../helpers/timing.js'
import { ADMIN_ENV, loggedIn } from '../helpers/auth.js'

const apps = [{
  name: 'ops-app',
  version: '1.0.0',
  pollingReaktors: [{ reaktorDefinitionId: 'ops-poller', interval: '1m', createReaktor: () => async () => false }]
}]

t.test('the OpenAPI document describes /api/v1 and needs no token', async (t) => {
  const app = await build(t, { env: ADMIN_ENV, apps })
  const res = await app.inject({ method: 'GET', url: '/api/v1/openapi.json' })
  t.equal(res.statusCode, 200)
  const doc = res.json()
  t.equal(doc.openapi, '3.1.0')
  const paths = Object.keys(doc.paths).sort()
  t.same(paths, [
    '/api/v1/aktor/{aktorName}',
    '/api/v1/apps',
    '/api/v1/apps/{name}',
    '/api/v1/apps/{name}/activate',
    '/api/v1/apps/{name}/versions/{version}',
    '/api/v1/audit',
    '/api/v1/auth/login',
    '/api/v1/auth/logout',
    '/api/v1/auth/me',
    '/api/v1/auth/password',
    '/api/v1/polling',
    '/api/v1/polling/start',
    '/api/v1/polling/stop',
    '/api/v1/polling/{reaktorId}/run',
    '/api/v1/polling/{reaktorId}/runs',
    '/api/v1/polling/{reaktorId}/start',
    '/api/v1/polling/{reaktorId}/status',
    '/api/v1/polling/{reaktorId}/stop',
    '/api/v1/tokens',
    '/api/v1/tokens/{id}',
    '/api/v1/users',
    '/api/v1/users/{username}',
    '/api/v1/users/{username}/password'
  ], 'the API and nothing else (no login page, no app UI, no metrics)')
  t.ok(doc.paths['/api/v1/polling/{reaktorId}/status'].get.responses['404'], 'error responses are documented')
  for (const [path, method] of [['/api/v1/polling', 'get'], ['/api/v1/polling/{reaktorId}/status', 'get'],
    ['/api/v1/polling/{reaktorId}/start', 'post'], ['/api/v1/polling/{reaktorId}/stop', 'post'], ['/api/v1/polling/{reaktorId}/run', 'post']]) {
    const responses = doc.paths[path][method].responses
    t.ok(responses['400'] !== undefined && responses['500'] !== undefined, `${method.toUpperCase()} ${path} documents 400 and 500`)
  }
  t.match(doc.components.securitySchemes.serviceToken, { type: 'apiKey', in: 'header', name: 'X-Service-Token', description: /API token/ })
})

t.test('GET /metrics serves Prometheus text with process, HTTP and polling metrics', async (t) => {
  const app = await build(t, { env: ADMIN_ENV, apps })
  const call = await loggedIn(app)
  await call('POST', '/api/v1/polling/ops-poller/start')
  const res = await app.inject({ method: 'GET', url: '/metrics' })
  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /^text\/plain/)
  t.match(res.body, /process_resident_memory_bytes\{node="test-node"\} \d+/)
  t.match(res.body, /http_request_duration_seconds_count\{[^}]*method="POST",route="\/api\/v1\/polling\/:reaktorId\/start",status_code="200"[^}]*\} 1\n/)
  // Ownership is taken by the scheduler right after the start; the gauge follows it.
  await waitFor(async () => /reaktor_polling_owned\{node="test-node"\} 1\n/.test((await app.inject({ method: 'GET', url: '/metrics' })).body),
    { what: 'the owned gauge to show the started reaktor' })
  t.pass('owned gauge shows the running reaktor')
})

t.test('finished polling runs are counted by outcome and timed in /metrics', async (t) => {
  const app = await build(t, { env: ADMIN_ENV, apps })
  const call = await loggedIn(app)
  const metric = async (pattern: RegExp): Promise<string | undefined> =>
    pattern.exec((await app.inject({ method: 'GET', url: '/metrics' })).body)?.[1]
  const runs = /reaktor_polling_runs_total\{[^}]*reaktor="ops-poller",outcome="no_work"[^}]*\} (\d+)\n/
  const durations = /reaktor_polling_run_duration_seconds_count\{[^}]*reaktor="ops-poller"[^}]*\} (\d+)\n/
  t.equal(await metric(runs), undefined, 'nothing counted before a run')
  await call('POST', '/api/v1/polling/ops-poller/start')
  // The first run is due at once and returns false ("no work").
  t.equal(await waitFor(async () => await metric(runs), { what: 'the run to be counted' }), '1')
  t.equal(await metric(durations), '1', 'and its duration observed')
  t.match((await app.inject({ method: 'GET', url: '/metrics' })).body, /reaktor_polling_cluster_members\{node="test-node"\} 1\n/, 'the cluster size as this node sees it')
})
