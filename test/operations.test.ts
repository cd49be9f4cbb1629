import t from 'tap'
import { build, waitFor } from './helper.js'
import { ADMIN_ENV, loginToken } from './auth-helper.js'

const apps = [{
  name: 'ops-app',
  version: '1.0.0',
  pollingReaktors: [{ reaktorDefinitionId: 'ops-poller', interval: '1m', createReaktor: () => async () => false }]
}]

t.test('the OpenAPI document describes /api/v1 and needs the token', async (t) => {
  const app = await build(t, { env: ADMIN_ENV, apps })
  t.equal((await app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).statusCode, 401)
  const token = await loginToken(app)
  const res = await app.inject({ method: 'GET', url: '/api/v1/openapi.json', headers: { 'x-service-token': token } })
  t.equal(res.statusCode, 200)
  const doc = res.json()
  t.equal(doc.openapi, '3.1.0')
  const paths = Object.keys(doc.paths).sort()
  t.same(paths, [
    '/api/v1/aktor/{aktorName}',
    '/api/v1/auth/login',
    '/api/v1/auth/logout',
    '/api/v1/polling',
    '/api/v1/polling/{reaktorId}/start',
    '/api/v1/polling/{reaktorId}/status',
    '/api/v1/polling/{reaktorId}/stop'
  ], 'the API and nothing else (no login page, no app UI, no metrics)')
  t.ok(doc.paths['/api/v1/polling/{reaktorId}/status'].get.responses['404'], 'error responses are documented')
  t.same(doc.components.securitySchemes.serviceToken, { type: 'apiKey', in: 'header', name: 'X-Service-Token' })
})

t.test('GET /metrics serves Prometheus text with process, HTTP and polling metrics', async (t) => {
  const app = await build(t, { env: ADMIN_ENV, apps })
  const token = await loginToken(app)
  await app.inject({ method: 'POST', url: '/api/v1/polling/ops-poller/start', headers: { 'x-service-token': token } })
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
