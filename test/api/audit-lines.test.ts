/**
 * The audit lines of the polling control routes, across users: each action names the user of the
 * token that asked (not just the admin's), refused requests write none (run now's 409 excepted, as
 * documented), and no line of the log carries a session token.
 */
import t from 'tap'
import { ADMIN, loginToken, sessionToken, tokenHeader } from '../helpers/auth.js'
import { auditService } from '../helpers/audit.js'

t.test('one audit line per action with the user of the token and the node; refused requests write none; no token in the log', async (t) => {
  const { app, lines, audits } = await auditService(t)
  const bobName = `bob-${process.pid}`
  const tokens = { [ADMIN.username]: await loginToken(app), [bobName]: await sessionToken(app, bobName) }
  const send = async (user: string | null, method: 'GET' | 'POST', url: string, payload?: unknown, contentType = 'application/json'): Promise<number> => {
    const res = await app.inject({
      method,
      url,
      headers: { ...(user === null ? {} : tokenHeader(tokens[user])), ...(payload === undefined ? {} : { 'content-type': contentType }) },
      payload: typeof payload === 'string' || payload === undefined ? payload : JSON.stringify(payload)
    })
    return res.statusCode
  }

  t.equal(await send(bobName, 'POST', '/api/v1/polling/a/start'), 200)
  t.equal(await send(ADMIN.username, 'POST', '/api/v1/polling/a/run'), 202)
  t.equal(await send(bobName, 'POST', '/api/v1/polling/b/run'), 409)
  t.equal(await send(bobName, 'POST', '/api/v1/polling/stop', { ids: ['a', 'nope'] }), 200)
  t.equal(await send(ADMIN.username, 'POST', '/api/v1/polling/start', { app: 'audit-app' }), 200)
  t.equal(await send(bobName, 'POST', '/api/v1/polling/b/stop'), 200)
  // Padded with made-up ids, as long as allowed, as many as the body limit lets through.
  const madeUp = Array.from({ length: 5000 }, (_, i) => `${i}-`.padEnd(1024, 'x'))
  t.equal(await send(ADMIN.username, 'POST', '/api/v1/polling/stop', { ids: [...madeUp.slice(0, 2500), 'a', ...madeUp.slice(2500)] }), 200)

  // Refused: no line.
  const refused: Array<[string | null, 'GET' | 'POST', string, unknown?, string?]> = [
    [null, 'POST', '/api/v1/polling/a/start'],
    [null, 'POST', '/api/v1/polling/a/run'],
    [null, 'POST', '/api/v1/polling/stop', { ids: ['a'] }],
    [null, 'POST', '/api/v1/polling/stop', '{bad'],
    [bobName, 'POST', '/api/v1/polling/nope/run'],
    [bobName, 'POST', '/api/v1/polling/nope/stop'],
    [bobName, 'POST', '/api/v1/polling/%00/run'],
    [bobName, 'POST', '/api/v1/polling/stop', { ids: [] }],
    [bobName, 'POST', '/api/v1/polling/stop', { ids: ['a'], app: 'audit-app' }],
    [bobName, 'POST', '/api/v1/polling/stop', {}],
    [bobName, 'POST', '/api/v1/polling/stop', '{"__proto__": {"ids": ["a"]}}'],
    [bobName, 'POST', '/api/v1/polling/stop', '{"ids": ["a"]}', 'text/plain'],
    [bobName, 'POST', '/api/v1/polling/start', { app: 'ghost' }],
    [bobName, 'GET', '/api/v1/polling/a/runs'],
    [bobName, 'GET', '/api/v1/polling/a/status']
  ]
  const before = audits().length
  for (const [user, method, url, payload, type] of refused) {
    const code = await send(user, method, url, payload, type)
    t.ok(code === 200 ? method === 'GET' : code >= 400, `${user ?? 'no token'} ${method} ${url} ${JSON.stringify(payload) ?? ''}: ${code}`)
  }
  t.equal(audits().length, before, 'refused requests and reads write no audit line')

  const node = app.config.nodeId
  const address = '127.0.0.1'
  t.same(audits(), [
    { action: 'auth.login', targets: [], user: ADMIN.username, address, node, details: { route: '/api/v1/auth/login' } },
    { action: 'polling.start', targets: ['a'], user: bobName, address, node, details: { changed: true } },
    { action: 'polling.run', targets: ['a'], user: ADMIN.username, address, node, details: { requested: true } },
    { action: 'polling.run', targets: ['b'], user: bobName, address, node, details: { requested: false } },
    { action: 'polling.bulk_stop', targets: ['a'], user: bobName, address, node, details: { changed: ['a'], unchanged: [], notFound: ['nope'] } },
    { action: 'polling.bulk_start', targets: ['a', 'b'], user: ADMIN.username, address, node, details: { app: 'audit-app', changed: ['a', 'b'], unchanged: [], notFound: [] } },
    { action: 'polling.stop', targets: ['b'], user: bobName, address, node, details: { changed: true } },
    { action: 'polling.bulk_stop', targets: ['a'], user: ADMIN.username, address, node, details: { changed: ['a'], unchanged: [], notFound: madeUp.slice(0, 10).map((id) => id.slice(0, 200)), notFoundCount: 5000 } }
  ], 'each action by the user whose token asked')
  const longest = Math.max(...lines.filter((l) => l.includes('"audit"')).map((l) => Buffer.byteLength(l)))
  t.ok(longest <= 16 * 1024, `made-up ids cannot pad an audit line past what log pipelines keep whole (the longest: ${longest} bytes)`)
  const auditLines = lines.map((l) => JSON.parse(l)).filter((l) => l.audit !== undefined)
  t.ok(auditLines.every((l) => l.level === 30 && l.msg === `audit: ${l.audit.action as string}` && typeof l.reqId === 'string'),
    'info lines, "audit: <action>", tied to their request')

  t.ok(lines.length > auditLines.length, 'the request lines are read too')
  for (const [user, token] of Object.entries(tokens)) {
    t.notOk(lines.some((l) => l.includes(token)), `no log line holds the token of ${user}`)
  }
})
