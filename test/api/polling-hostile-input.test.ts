/**
 * Hostile input on the polling routes of run now, run history and bulk control: prototype keys,
 * NUL and lone surrogates, repeated and disguised query values, huge arrays, content-type games and
 * empty bodies. Each is answered with its status and the one error body, never a 5xx, and changes
 * nothing; 401 comes before any validation.
 */
import t from 'tap'
import { ADMIN_ENV, loginToken, tokenHeader } from '../helpers/auth.js'
import { build } from '../helpers/app.js'
import { FAST_SCHEDULER, probe } from '../helpers/scheduler.js'

interface Case {
  method: 'GET' | 'POST'
  url: string
  body?: string
  type?: string
  length?: string
  status: number
  message?: RegExp
  /** Answered by the router (a path it cannot route), before any hook: without a token too. */
  router?: true
}

const json = 'application/json'
const LIMIT_RULE = /^limit must be an integer from 1 to 500/

const cases: Case[] = [
  // Prototype keys: refused by the JSON parser or unknown, never read as the prototype.
  { method: 'POST', url: '/api/v1/polling/stop', body: '{"__proto__": {"ids": ["a"]}}', type: json, status: 400 },
  { method: 'POST', url: '/api/v1/polling/stop', body: '{"ids": ["a"], "__proto__": {"app": "x"}}', type: json, status: 400 },
  { method: 'POST', url: '/api/v1/polling/stop', body: '{"constructor": {"prototype": {"ids": ["a"]}}}', type: json, status: 400 },
  { method: 'POST', url: '/api/v1/polling/stop', body: '{"app": "__proto__"}', type: json, status: 404, message: /^App "__proto__" is not loaded$/ },
  { method: 'POST', url: '/api/v1/polling/stop', body: '{"app": "constructor"}', type: json, status: 404, message: /^App "constructor" is not loaded$/ },
  { method: 'POST', url: '/api/v1/polling/__proto__/run', status: 404, message: /^Polling reaktor "__proto__" is not registered$/ },
  { method: 'GET', url: '/api/v1/polling/constructor/runs', status: 404, message: /^Polling reaktor "constructor" is not registered$/ },
  { method: 'GET', url: '/api/v1/polling/hasOwnProperty/status', status: 404, message: /^Polling reaktor "hasOwnProperty" is not registered$/ },
  // NUL, lone surrogates, empty ids: in the path, the body and the cursor.
  { method: 'POST', url: '/api/v1/polling/a%00/run', status: 400 },
  { method: 'GET', url: '/api/v1/polling/%ED%B0%80/runs', status: 400, message: /is not a valid url component/, router: true },
  { method: 'POST', url: '/api/v1/polling/stop', body: '{"ids": ["a\\u0000"]}', type: json, status: 400, message: /^body\/ids\/0 / },
  { method: 'POST', url: '/api/v1/polling/stop', body: '{"ids": ["\\udc00"]}', type: json, status: 400, message: /^body\/ids\/0 / },
  { method: 'POST', url: '/api/v1/polling/stop', body: '{"ids": [""]}', type: json, status: 400, message: /^body\/ids\/0 / },
  { method: 'POST', url: '/api/v1/polling/stop', body: '{"app": "x\\ud800"}', type: json, status: 400, message: /^body\/app / },
  { method: 'GET', url: '/api/v1/polling/a/runs?before=%00', status: 400, message: /^before must be the nextBefore of a previous page, or an ISO 8601/ },
  { method: 'GET', url: '/api/v1/polling/a/runs?before=', status: 400, message: /^before must be the nextBefore of a previous page, or an ISO 8601/ },
  { method: 'GET', url: `/api/v1/polling/a/runs?before=${'A'.repeat(101)}`, status: 400, message: /^before must be the nextBefore of a previous page, or an ISO 8601/ },
  { method: 'GET', url: '/api/v1/polling/a/runs?before=%ED%A0%80', status: 400 },
  // Huge arrays and ids.
  { method: 'POST', url: '/api/v1/polling/stop', body: JSON.stringify({ ids: Array.from({ length: 10_001 }, (_, i) => `r${i}`) }), type: json, status: 400, message: /more than 10000 items/ },
  { method: 'POST', url: '/api/v1/polling/stop', body: JSON.stringify({ ids: ['x'.repeat(1025)] }), type: json, status: 400, message: /more than 1024 characters/ },
  { method: 'POST', url: '/api/v1/polling/stop', body: JSON.stringify({ ids: Array.from({ length: 7000 }, (_, i) => `${i}`.padEnd(1024, 'x')) }), type: json, status: 413 },
  { method: 'POST', url: `/api/v1/polling/${'x'.repeat(1025)}/run`, status: 414, router: true },
  // Repeated and disguised query values.
  { method: 'GET', url: '/api/v1/polling/a/runs?limit=1&limit=2', status: 400, message: LIMIT_RULE },
  { method: 'GET', url: '/api/v1/polling/a/runs?before=2026-11-25T08:00:00Z&before=2026-11-25T09:00:00Z', status: 400, message: /^before must be given once/ },
  { method: 'GET', url: '/api/v1/polling/a/runs?limit=', status: 400, message: LIMIT_RULE },
  { method: 'GET', url: '/api/v1/polling/a/runs?limit=0x10', status: 400, message: LIMIT_RULE },
  { method: 'GET', url: '/api/v1/polling/a/runs?limit=1e2', status: 400, message: LIMIT_RULE },
  { method: 'GET', url: '/api/v1/polling/a/runs?limit=%2010', status: 400, message: LIMIT_RULE },
  { method: 'GET', url: '/api/v1/polling/a/runs?limit=10.0', status: 400, message: LIMIT_RULE },
  { method: 'GET', url: '/api/v1/polling/a/runs?limit=true', status: 400, message: LIMIT_RULE },
  { method: 'GET', url: '/api/v1/polling/a/runs?limit=501', status: 400, message: LIMIT_RULE },
  { method: 'GET', url: '/api/v1/polling/a/runs?limit=0', status: 400, message: LIMIT_RULE },
  { method: 'GET', url: '/api/v1/polling/a/runs?limit=-1', status: 400, message: LIMIT_RULE },
  { method: 'GET', url: '/api/v1/polling/a/runs?limit=99999999999999999999', status: 400, message: LIMIT_RULE },
  { method: 'GET', url: '/api/v1/polling/a/runs?limit=500', status: 200 },
  { method: 'GET', url: '/api/v1/polling/a/runs?limit=007', status: 200 },
  // Content-type games and empty bodies.
  { method: 'POST', url: '/api/v1/polling/stop', body: '', type: json, status: 400 },
  { method: 'POST', url: '/api/v1/polling/stop', body: '', type: json, length: '0', status: 400 },
  { method: 'POST', url: '/api/v1/polling/stop', status: 400, message: /exactly one of "ids" or "app"/ },
  { method: 'POST', url: '/api/v1/polling/stop', body: 'ids=a', type: 'application/x-www-form-urlencoded', status: 415 },
  { method: 'POST', url: '/api/v1/polling/stop', body: '{"ids": ["a"]}', type: 'text/plain', status: 415, message: /^Send the body as application\/json, not text\/plain$/ },
  { method: 'POST', url: '/api/v1/polling/start', body: '{"ids": ["a"]}', type: 'text/plain; charset=utf-8', status: 415 },
  { method: 'POST', url: '/api/v1/polling/stop', body: '{"ids": ["a"]}', type: 'Application/JSON; charset=utf-8', status: 200 },
  { method: 'POST', url: '/api/v1/polling/stop', body: '{"ids": ["a"]}', type: 'application/vnd.api+json', status: 415 },
  { method: 'POST', url: '/api/v1/polling/stop', body: '{"ids": ["a"]', type: json, status: 400 },
  { method: 'POST', url: '/api/v1/polling/stop', body: 'null', type: json, status: 400 },
  { method: 'POST', url: '/api/v1/polling/stop', body: '["a"]', type: json, status: 400 },
  { method: 'POST', url: '/api/v1/polling/stop', body: '{"ids": "a"}', type: json, status: 400 },
  { method: 'POST', url: '/api/v1/polling/stop', body: '{"ids": [1]}', type: json, status: 400 },
  { method: 'POST', url: '/api/v1/polling/stop', body: '{"ids": ["a", "a"]}', type: json, status: 400 },
  { method: 'POST', url: '/api/v1/polling/stop', body: '{"ids": ["a"], "app": "hostile-app"}', type: json, status: 400 },
  { method: 'POST', url: '/api/v1/polling/a/run', body: '', type: json, status: 400 },
  { method: 'POST', url: '/api/v1/polling/a/run', body: '{bad', type: json, status: 400 }
]

t.test('hostile requests get their status and the error body, change nothing, and 401 comes first', async (t) => {
  const p = probe('a', () => false, { interval: '1h' })
  const app = await build(t, { env: ADMIN_ENV, scheduler: FAST_SCHEDULER, apps: [{ name: 'hostile-app', version: '1.0.0', pollingReaktors: [p.registration] }] })
  const token = await loginToken(app)
  const send = async (c: Case, authenticated: boolean): Promise<{ statusCode: number, body: any }> => {
    const headers: Record<string, string> = authenticated ? tokenHeader(token) : {}
    if (c.type !== undefined) headers['content-type'] = c.type
    if (c.length !== undefined) headers['content-length'] = c.length
    const res = await app.inject({ method: c.method, url: c.url, headers, payload: c.body })
    return { statusCode: res.statusCode, body: res.json() }
  }
  for (const c of cases) {
    const what = `${c.method} ${c.url.slice(0, 80)} ${c.type ?? ''} ${(c.body ?? '').slice(0, 60)}`
    const res = await send(c, true)
    t.equal(res.statusCode, c.status, `${what}: ${c.status}`)
    if (c.status >= 400) {
      t.same(Object.keys(res.body).sort(), ['error', 'message', 'statusCode'], `${what}: the error body`)
      t.equal(res.body.statusCode, c.status)
      if (c.message !== undefined) t.match(res.body.message, c.message, `${what}: ${res.body.message as string}`)
    }
    const anonymous = await send(c, false)
    if (c.router === true) t.equal(anonymous.statusCode, c.status, `${what}: the router's answer without a token too`)
    else t.same(anonymous, { statusCode: 401, body: { statusCode: 401, error: 'Unauthorized', message: 'Missing, invalid or expired session token' } }, `${what}: 401 without a token`)
  }
  t.equal(p.runs.length, 0, 'nothing ran')
  t.same((await app.inject({ method: 'GET', url: '/api/v1/polling/a/status', headers: tokenHeader(token) })).json().state, 'stopped', 'nothing started')
})

t.test('a failure inside run now, bulk, status or history answers 500 with no internals in the body', async (t) => {
  const p = probe('a', () => false, { interval: '1h' })
  const app = await build(t, { env: ADMIN_ENV, scheduler: FAST_SCHEDULER, apps: [{ name: 'hostile-app', version: '1.0.0', pollingReaktors: [p.registration] }] })
  const token = await loginToken(app)
  const secret = 'relation "polling_reaktors" at 10.0.0.7:5432 password=hunter2'
  const fail = async (): Promise<never> => { throw Object.assign(new Error(secret), { code: 'XX000', detail: secret }) }
  app.polling.run = fail
  app.polling.bulk = fail
  app.polling.reads.statusJson = fail
  // The history reads through the service's query executor (the session is cached: auth reads nothing).
  const executor = app.db.getExecutor()
  const executeQuery = executor.executeQuery.bind(executor)
  executor.executeQuery = fail
  for (const [method, url, payload] of [
    ['POST', '/api/v1/polling/a/run'],
    ['POST', '/api/v1/polling/stop', { ids: ['a'] }],
    ['GET', '/api/v1/polling/a/status'],
    ['GET', '/api/v1/polling/a/runs']
  ] as const) {
    const res = await app.inject({ method, url, headers: tokenHeader(token), payload })
    t.same({ statusCode: res.statusCode, body: res.json() }, { statusCode: 500, body: { statusCode: 500, error: 'Internal Server Error', message: 'Internal Server Error' } }, `${method} ${url}`)
    t.notOk(res.body.includes('hunter2'), 'nothing of the error in the body')
  }
  executor.executeQuery = executeQuery
})
