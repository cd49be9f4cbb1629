/**
 * Text PostgreSQL cannot store (NUL, a lone UTF-16 surrogate) never reaches it: every request string
 * that ends up in a query is refused with 400 or 401 up front, and nothing is logged as a failure.
 */
import pino from 'pino'
import t from 'tap'
import { buildApp, loggerOptions } from '../../src/app.js'
import { SESSION_COOKIE } from '../../src/auth/types.js'
import { build, testConfig } from '../helpers/app.js'
import { ADMIN, ADMIN_ENV, loginToken, tokenHeader } from '../helpers/auth.js'
import { createTestDatabase } from '../helpers/database.js'
import { logOutput } from '../helpers/log.js'

t.test('NUL and lone surrogates in any request string are 400/401, never 500, and log no stack', async (t) => {
  const { stream, lines } = logOutput()
  const config = await testConfig(t, { ...ADMIN_ENV, LOGIN_RATE_LIMIT: '100000' })
  const logger = pino({ ...loggerOptions(config), level: 'trace' }, stream)
  const app = await buildApp({ config, databaseUrl: await createTestDatabase(t), logger })
  t.teardown(async () => await app.close())
  const token = await loginToken(app)

  // JSON strings carry the raw characters; URLs and forms carry their percent-encodings.
  const json = ['admin\u0000', 'adm\u0000in', '\ud800', 'admin\udfff', 'a\ud800b']
  const encoded = ['adm%00in', '%00', '%ED%A0%80', 'a%ED%B0%80b']
  const requests: Array<{ what: string, method: 'GET' | 'POST', url: string, headers?: Record<string, string>, payload?: unknown, allowed: number[] }> = []
  for (const bad of json) {
    requests.push({ what: `JSON login username ${JSON.stringify(bad)}`, method: 'POST', url: '/api/v1/auth/login', payload: { username: bad, password: ADMIN.password }, allowed: [400, 401] })
    requests.push({ what: `JSON login password ${JSON.stringify(bad)}`, method: 'POST', url: '/api/v1/auth/login', payload: { username: ADMIN.username, password: bad }, allowed: [400, 401] })
  }
  for (const bad of encoded) {
    const form = { 'content-type': 'application/x-www-form-urlencoded' }
    requests.push({ what: `form login username ${bad}`, method: 'POST', url: '/login', headers: form, payload: `username=${bad}&password=x`, allowed: [400, 401] })
    requests.push({ what: `form login password ${bad}`, method: 'POST', url: '/login', headers: form, payload: `username=${ADMIN.username}&password=${bad}`, allowed: [400, 401] })
    for (const action of ['status', 'start', 'stop']) {
      requests.push({ what: `polling ${action} ${bad}`, method: action === 'status' ? 'GET' : 'POST', url: `/api/v1/polling/${bad}/${action}`, headers: tokenHeader(token), allowed: [400] })
    }
    requests.push({ what: `aktor ${bad}`, method: 'POST', url: `/api/v1/aktor/${bad}`, headers: tokenHeader(token), payload: {}, allowed: [400] })
    requests.push({ what: `token header ending in ${bad}`, method: 'GET', url: '/api/v1/polling', headers: tokenHeader(`${token.slice(0, 40)}${bad}`), allowed: [401] })
    requests.push({ what: `cookie ${bad} on the home page`, method: 'GET', url: '/', headers: { cookie: `${SESSION_COOKIE}=${bad}` }, allowed: [302] })
  }
  for (const r of requests) {
    const res = await app.inject({ method: r.method, url: r.url, headers: r.headers, payload: r.payload as string | object | undefined })
    t.ok(r.allowed.includes(res.statusCode), `${r.what}: ${res.statusCode} ${res.body.slice(0, 120)}`)
    if (res.statusCode >= 400 && String(res.headers['content-type']).startsWith('application/json')) {
      t.same(Object.keys(res.json()).sort(), ['error', 'message', 'statusCode'], `${r.what}: the error body`)
    }
  }
  t.ok(requests.length >= 40, `${requests.length} requests tried`)
  const failures = lines.filter((l) => /"level":(50|60)/.test(l) || l.includes('"stack"'))
  t.same(failures, [], 'no error line and no stack trace in the log')
  t.equal((await loginToken(app)).length, 43, 'the service still answers normally')
})

t.test('a reaktorDefinitionId with NUL or a lone surrogate stops the start (ids are stored in PostgreSQL)', async (t) => {
  for (const id of ['bad\u0000id', 'bad\ud800id', '\udc00']) {
    await t.rejects(build(t, {
      apps: [{ name: 'app', version: '1.0.0', pollingReaktors: [{ reaktorDefinitionId: id, interval: '5s', createReaktor: () => () => false }] }]
    }), { message: /reaktorDefinitionId ".*" is not allowed; expected at most 200 printable characters/ }, JSON.stringify(id))
  }
  // "." and "..": a URL resolves them away, so no route could name the reaktor.
  for (const id of ['.', '..']) {
    await t.rejects(build(t, {
      apps: [{ name: 'app', version: '1.0.0', pollingReaktors: [{ reaktorDefinitionId: id, interval: '5s', createReaktor: () => () => false }] }]
    }), { message: `reaktorDefinitionId "${id}" is not allowed: a URL path cannot carry it` }, JSON.stringify(id))
  }
  // A character outside the BMP is a proper surrogate pair: allowed.
  const app = await build(t, { apps: [{ name: 'app', version: '1.0.0', pollingReaktors: [{ reaktorDefinitionId: 'rocket-\u{1F680}', interval: '5s', createReaktor: () => () => false }] }] })
  t.equal(app.apps.pollingReaktors.has('rocket-\u{1F680}'), true)
})
