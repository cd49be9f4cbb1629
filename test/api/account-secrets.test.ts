/**
 * Secrets of the account routes never reach the log or the audit table: every route that takes
 * or gives a password or a token is driven with secret-bearing input (right and wrong, valid and
 * refused) under the service's own logger options at its most verbose level, and no secret appears
 * in any line or row. Every answer that carries a secret is `cache-control: no-store`.
 */
import t from 'tap'
import pino from 'pino'
import { sql } from 'kysely'
import { buildApp, loggerOptions } from '../../src/app.js'
import { SESSION_COOKIE } from '../../src/auth/types.js'
import { ADMIN, ADMIN_ENV, apiLogin, formLogin, loginToken, sessionCookie, tokenHeader } from '../helpers/auth.js'
import { testConfig } from '../helpers/app.js'
import { createTestDatabase } from '../helpers/database.js'
import { logOutput } from '../helpers/log.js'

t.test('no password or token of the account routes is logged or audited', async (t) => {
  const { stream, lines } = logOutput()
  const config = await testConfig(t, ADMIN_ENV)
  const app = await buildApp({ config, databaseUrl: await createTestDatabase(t), logger: pino({ ...loggerOptions(config), level: 'trace' }, stream) })
  t.teardown(async () => await app.close())

  const secrets: string[] = [ADMIN.password]
  const admin = await loginToken(app)
  secrets.push(admin)
  const call = async (token: string, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object) => {
    const res = await app.inject({ method, url, headers: tokenHeader(token), payload })
    return { statusCode: res.statusCode, body: res.json(), noStore: res.headers['cache-control'] === 'no-store' }
  }

  // Users: a chosen password, a generated one, refused ones (too short, a taken name).
  const chosen = 'chosen password of bob 1'
  secrets.push(chosen)
  const bob = await call(admin, 'POST', '/api/v1/users', { username: 'bob', role: 'operator', password: chosen })
  t.equal(bob.statusCode, 201)
  const carol = await call(admin, 'POST', '/api/v1/users', { username: 'carol', role: 'admin' })
  t.equal(carol.statusCode, 201)
  t.ok(carol.noStore, 'a generated password is never cached')
  secrets.push(carol.body.password)
  t.equal((await call(admin, 'POST', '/api/v1/users', { username: 'dave', role: 'operator', password: 'short-pw-1' })).statusCode, 400)
  secrets.push('short-pw-1')
  t.equal((await call(admin, 'POST', '/api/v1/users', { username: 'BOB', role: 'operator', password: 'taken name password' })).statusCode, 409)
  secrets.push('taken name password')

  // Resets: chosen and generated.
  const resetTo = 'reset by the admin 1'
  secrets.push(resetTo)
  t.equal((await call(admin, 'POST', '/api/v1/users/bob/password', { password: resetTo })).statusCode, 200)
  const generated = await call(admin, 'POST', '/api/v1/users/carol/password', {})
  t.equal(generated.statusCode, 200)
  t.ok(generated.noStore)
  secrets.push(generated.body.password)

  // Own password: a wrong current one, a refused new one, then a change.
  const bobSession = await loginToken(app, { username: 'bob', password: resetTo })
  secrets.push(bobSession)
  const wrongCurrent = 'not bobs password at all'
  const refusedNew = 'tiny-pw'
  const newPassword = 'bobs brand new password'
  secrets.push(wrongCurrent, refusedNew, newPassword)
  t.equal((await call(bobSession, 'POST', '/api/v1/auth/password', { currentPassword: wrongCurrent, newPassword })).statusCode, 403)
  t.equal((await call(bobSession, 'POST', '/api/v1/auth/password', { currentPassword: resetTo, newPassword: refusedNew })).statusCode, 400)
  t.equal((await call(bobSession, 'POST', '/api/v1/auth/password', { currentPassword: resetTo, newPassword })).statusCode, 200)

  // Logins: JSON and form, right and wrong.
  const bobAgain = await loginToken(app, { username: 'bob', password: newPassword })
  secrets.push(bobAgain)
  t.equal((await apiLogin(app, { username: 'bob', password: 'a wrong guess at bob' })).statusCode, 401)
  secrets.push('a wrong guess at bob')
  const form = await formLogin(app, { username: 'bob', password: newPassword })
  const cookie = sessionCookie(form)?.value
  t.ok(cookie, 'the form login set the cookie')
  secrets.push(cookie!)
  t.equal((await formLogin(app, { username: 'bob', password: 'a wrong form guess' })).statusCode, 401)
  secrets.push('a wrong form guess')

  // Tokens: created, used, listed, refused, revoked.
  const created = await call(bobAgain, 'POST', '/api/v1/tokens', { name: 'nightly', expiresIn: '1d' })
  t.equal(created.statusCode, 201)
  t.ok(created.noStore, 'the answer with the token is never cached')
  const apiToken = created.body.token as string
  secrets.push(apiToken)
  t.equal((await call(apiToken, 'GET', '/api/v1/tokens')).statusCode, 200)
  t.equal((await call(apiToken, 'POST', '/api/v1/tokens', { name: 'minted' })).statusCode, 403)
  t.equal((await call(apiToken, 'POST', '/api/v1/auth/logout')).statusCode, 400)
  t.equal((await call(admin, 'GET', '/api/v1/audit?limit=500')).statusCode, 200)
  // A token pasted where its id belongs, or put in a query string, is in the request line.
  t.equal((await call(bobAgain, 'DELETE', `/api/v1/tokens/${apiToken}`)).statusCode, 404)
  t.equal((await call(apiToken, 'GET', `/api/v1/polling?token=${apiToken}`)).statusCode, 200)
  t.equal((await call(apiToken, 'DELETE', `/api/v1/tokens/${String(created.body.id)}`)).statusCode, 200)
  t.equal((await call(apiToken, 'GET', '/api/v1/tokens')).statusCode, 401, 'revoked')

  // Changes and sign-outs.
  t.equal((await call(admin, 'PATCH', '/api/v1/users/bob', { role: 'admin', disabled: true })).statusCode, 200)
  const logout = await app.inject({ method: 'POST', url: '/logout', headers: { 'content-type': 'application/x-www-form-urlencoded' }, cookies: { [SESSION_COOKIE]: cookie! }, payload: '' })
  t.equal(logout.statusCode, 303)
  t.equal((await call(admin, 'DELETE', '/api/v1/users/bob')).statusCode, 200)
  t.equal((await call(admin, 'POST', '/api/v1/auth/logout')).statusCode, 200)

  // What a careless log call would write: redaction must catch every secret-bearing field.
  app.log.info({ body: { currentPassword: wrongCurrent, newPassword, password: chosen, token: apiToken }, currentPassword: wrongCurrent, newPassword }, 'probe')
  const probe = lines.find((l) => l.includes('"probe"'))
  t.match(probe, /\[redacted\]/, 'the probe line was written, redacted')

  const output = lines.join('')
  t.match(output, /audit: user\.create/, 'the actions were logged')
  t.match(output, /audit: token\.revoke/)
  t.match(output, /"url":"\/api\/v1\/tokens\/reaktor_pat_\[redacted\]"/, 'the request line is logged without the token')
  const { rows } = await sql<{ text: string }>`select row_to_json(a)::text as text from audit a`.execute(app.db)
  t.ok(rows.length > 10, `${rows.length} audit rows`)
  const audit = rows.map((r) => r.text).join('\n')
  for (const secret of secrets) {
    t.ok(typeof secret === 'string' && secret.length >= 7, 'a secret to look for')
    t.notOk(output.includes(secret), `${secret.slice(0, 5)}… is in no log line`)
    t.notOk(audit.includes(secret), `${secret.slice(0, 5)}… is in no audit row`)
  }
})
