import { createHash } from 'node:crypto'
import fs from 'node:fs/promises'
import path from 'node:path'
import pino from 'pino'
import t from 'tap'
import { buildApp, loggerOptions } from '../../src/app.js'
import { hashPassword, verifyPassword } from '../../src/auth/password.js'
import { SESSION_COOKIE } from '../../src/auth/types.js'
import { build, testConfig } from '../helpers/app.js'
import { ADMIN, ADMIN_ENV, apiLogin, formLogin, loginToken, logout, sessionCookie, whoami } from '../helpers/auth.js'
import { tempDir } from '../helpers/temp-dir.js'
import { deadline, waitFor } from '../helpers/timing.js'
import { createTestDatabase } from '../helpers/database.js'
import { logOutput } from '../helpers/log.js'

t.test('passwords: scrypt with a per-user salt, parameters encoded, verified', async (t) => {
  const a = await hashPassword('s3cret password')
  const b = await hashPassword('s3cret password')
  t.match(a, /^scrypt\$\d+\$\d+\$\d+\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/)
  t.not(a, b, 'a fresh salt each time')
  t.notMatch(a, /s3cret/)
  t.equal(await verifyPassword('s3cret password', a), true)
  t.equal(await verifyPassword('s3cret passworD', a), false)
  t.equal(await verifyPassword('s3cret password', 'scrypt$garbage'), false)
  t.equal(await verifyPassword('s3cret password', a.slice(0, -4)), false, 'a truncated hash never matches')
})

t.test('JSON login returns a token and its expiry; bad credentials are 401, the same for unknown users', async (t) => {
  const app = await build(t, { whoami: true, env: { ...ADMIN_ENV, SESSION_TTL: '8h' } })
  const before = Date.now()
  const res = await apiLogin(app, ADMIN)
  t.equal(res.statusCode, 200)
  const body = res.json()
  t.same(Object.keys(body).sort(), ['expiresAt', 'token'])
  t.match(body.token, /^[A-Za-z0-9_-]{43}$/, '256 bits, base64url')
  t.equal(new Date(body.expiresAt).toISOString(), body.expiresAt, 'an ISO 8601 string')
  const ttl = Date.parse(body.expiresAt) - before
  t.ok(ttl > 8 * 3600_000 - 60_000 && ttl < 8 * 3600_000 + 60_000, `expires after SESSION_TTL (${ttl} ms)`)
  t.equal(res.headers['set-cookie'], undefined, 'the API login sets no cookie')
  t.equal((await whoami(app, body.token)).json().username, ADMIN.username)

  const wrong = await apiLogin(app, { username: ADMIN.username, password: 'wrong password' })
  const unknown = await apiLogin(app, { username: 'nobody', password: 'wrong password' })
  t.equal(wrong.statusCode, 401)
  t.same(wrong.json(), { statusCode: 401, error: 'Unauthorized', message: 'Invalid username or password' })
  t.equal(unknown.statusCode, 401)
  t.same(unknown.json(), wrong.json())

  const malformed = await app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { username: 'x' } })
  t.equal(malformed.statusCode, 400)
  t.same(Object.keys(malformed.json()).sort(), ['error', 'message', 'statusCode'])
})

t.test('a token authenticates API calls until logout, then 401', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const token = await loginToken(app)
  const other = await loginToken(app)
  t.equal((await whoami(app, token)).statusCode, 200)

  const out = await logout(app, token)
  t.equal(out.statusCode, 200)
  t.match(out.json(), { message: /Logged out/ })
  const cleared = String(out.headers['set-cookie'])
  t.match(cleared, new RegExp(`^${SESSION_COOKIE}=;`))
  t.match(cleared, /Max-Age=0/)
  t.match(cleared, /Path=\//)

  const after = await whoami(app, token)
  t.equal(after.statusCode, 401)
  t.same(after.json(), { statusCode: 401, error: 'Unauthorized', message: 'Missing, invalid or expired session token' })
  t.equal((await logout(app, token)).statusCode, 401, 'a revoked token cannot log out again')
  t.equal((await whoami(app, other)).statusCode, 200, 'only the presented session is revoked')
})

t.test('form login, then logout with the cookie token in X-Service-Token', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const login = await formLogin(app, { ...ADMIN, redirect: '/app-ui/demo@1.0.0/' })
  t.equal(login.statusCode, 303)
  const token = sessionCookie(login)!.value
  const out = await logout(app, token, { cookie: `${SESSION_COOKIE}=${token}` })
  t.equal(out.statusCode, 200)
  t.equal(sessionCookie(out)?.value, '', 'the cookie is cleared')
  t.equal((await whoami(app, token)).statusCode, 401)
})

t.test('missing, unknown, malformed and cookie-only credentials are 401 with the error body', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const token = await loginToken(app)
  const attempts: Array<[string, Record<string, string>]> = [
    ['no header', {}],
    ['empty header', { 'x-service-token': '' }],
    ['unknown token', { 'x-service-token': 'A'.repeat(43) }],
    ['not a token', { 'x-service-token': 'hello' }],
    ['token with a suffix', { 'x-service-token': token + 'x' }],
    // The API never authenticates by cookie, even a valid one.
    ['cookie only', { cookie: `${SESSION_COOKIE}=${token}` }],
    ['bearer header', { authorization: `Bearer ${token}` }]
  ]
  for (const [what, headers] of attempts) {
    for (const url of ['/api/v1/test/whoami', '/api/v1/auth/logout']) {
      const res = await app.inject({ method: url.endsWith('logout') ? 'POST' : 'GET', url, headers })
      t.equal(res.statusCode, 401, `${what}: ${url}`)
      t.same(res.json(), { statusCode: 401, error: 'Unauthorized', message: 'Missing, invalid or expired session token' })
    }
  }
  t.equal((await whoami(app, token)).statusCode, 200, 'the token itself is still fine')
})

t.test('a session expires after SESSION_TTL', async (t) => {
  const app = await build(t, { whoami: true, env: { ...ADMIN_ENV, SESSION_TTL: '1s' } })
  const res = await apiLogin(app, ADMIN)
  const { token, expiresAt } = res.json()
  t.equal((await whoami(app, token)).statusCode, 200, 'valid right after login')
  await waitFor(async () => (await whoami(app, token)).statusCode === 401, { timeoutMs: deadline(10_000), what: 'the session to expire' })
  t.ok(Date.now() >= Date.parse(expiresAt) - 50, 'not before its expiresAt')
  t.equal((await logout(app, token)).statusCode, 401)
  t.equal(await app.sessions.verify(token), null)
})

t.test('the sessions table stores only the SHA-256 of the token', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const token = await loginToken(app)
  const rows = await app.db.selectFrom('sessions').selectAll().execute()
  t.equal(rows.length, 1)
  const row = rows[0]
  t.ok(Buffer.isBuffer(row.token_hash))
  t.same(row.token_hash, createHash('sha256').update(token).digest())
  const dump = JSON.stringify(rows) + rows.map((r) => r.token_hash.toString('latin1') + r.token_hash.toString('base64url')).join('')
  t.notOk(dump.includes(token), 'the token appears nowhere in the table')
  const users = await app.db.selectFrom('users').selectAll().execute()
  t.notOk(JSON.stringify(users).includes(ADMIN.password), 'nor the password in users')
})

t.test('sessions survive a restart', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const first = await build(t, { whoami: true, env: ADMIN_ENV, databaseUrl })
  const token = await loginToken(first)
  await first.close()
  const second = await build(t, { whoami: true, env: ADMIN_ENV, databaseUrl })
  const me = await whoami(second, token)
  t.equal(me.statusCode, 200)
  t.equal(me.json().username, ADMIN.username)
})

t.test('first run without ADMIN_*: user admin with a random password, in a 0600 file, logged once', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const dataDir = await tempDir(t, 'reaktor-data-')
  const { stream, lines } = logOutput()
  const logger = pino({ level: 'info' }, stream)
  const config = await testConfig(t, { DATA_DIR: dataDir })
  const app = await buildApp({ config, databaseUrl, logger })
  t.teardown(async () => await app.close())

  const file = path.join(dataDir, 'initial-admin-password')
  const stat = await fs.stat(file)
  t.equal(stat.mode & 0o777, 0o600, 'only the owner can read it')
  const password = (await fs.readFile(file, 'utf8')).trim()
  t.ok(password.length >= 16, 'a long random password')

  const logged = lines.filter((l) => l.includes(file))
  t.equal(logged.length, 1, 'one log line says where the file is')
  t.ok(logged[0].includes(password), 'and shows the password once')

  t.equal((await apiLogin(app, { username: 'admin', password })).statusCode, 200, 'it logs in')
  t.same((await app.db.selectFrom('users').select('username').execute()).map((u) => u.username), ['admin'])

  // A restart creates nobody, rewrites nothing and logs no password.
  await app.close()
  lines.length = 0
  const again = await buildApp({ config, databaseUrl, logger })
  t.teardown(async () => await again.close())
  t.equal((await fs.readFile(file, 'utf8')).trim(), password)
  t.equal(lines.filter((l) => l.includes(password)).length, 0)
  t.equal((await again.db.selectFrom('users').select('id').execute()).length, 1)
  t.equal((await apiLogin(again, { username: 'admin', password })).statusCode, 200)
})

t.test('first run on several nodes at once creates exactly one admin', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const dirs = await Promise.all([0, 1, 2].map(async () => await tempDir(t, 'reaktor-data-')))
  const apps = await Promise.all(dirs.map(async (dir) => await build(t, { whoami: true, env: { DATA_DIR: dir }, databaseUrl })))
  const written = await Promise.all(dirs.map(async (dir) => await fs.readFile(path.join(dir, 'initial-admin-password'), 'utf8').catch(() => undefined)))
  const passwords = written.filter((p) => p !== undefined)
  t.equal(passwords.length, 1, 'one node wrote the password file')
  t.same((await apps[0].db.selectFrom('users').select('username').execute()).map((u) => u.username), ['admin'])
  t.equal((await apiLogin(apps[2], { username: 'admin', password: passwords[0]!.trim() })).statusCode, 200, 'and that password works')
})

t.test('ADMIN_USERNAME/ADMIN_PASSWORD create that user; an existing password is never changed', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const first = await build(t, { whoami: true, env: ADMIN_ENV, databaseUrl })
  t.same((await first.db.selectFrom('users').select('username').execute()).map((u) => u.username), [ADMIN.username], 'no random admin')
  await t.rejects(fs.access(path.join(first.config.dataDir, 'initial-admin-password')), 'no password file')
  t.equal((await apiLogin(first, ADMIN)).statusCode, 200)
  await first.close()

  const second = await build(t, { whoami: true, env: { ADMIN_USERNAME: ADMIN.username, ADMIN_PASSWORD: 'a different password' }, databaseUrl })
  t.equal((await apiLogin(second, ADMIN)).statusCode, 200, 'the original password still works')
  t.equal((await apiLogin(second, { username: ADMIN.username, password: 'a different password' })).statusCode, 401, 'the new one does not')
  await second.close()

  // Users exist, no ADMIN_*: nobody is created and no file is written.
  const third = await build(t, { whoami: true, databaseUrl })
  t.equal((await third.db.selectFrom('users').select('id').execute()).length, 1)
  await t.rejects(fs.access(path.join(third.config.dataDir, 'initial-admin-password')))
})

t.test('logs never contain passwords, tokens or cookies', async (t) => {
  const { stream, lines } = logOutput()
  // The server's own logger options (src/server.ts uses loggerOptions), at the most verbose level.
  const config = await testConfig(t, ADMIN_ENV)
  const logger = pino({ ...loggerOptions(config), level: 'trace' }, stream)
  const app = await buildApp({ config, databaseUrl: await createTestDatabase(t), logger })
  t.teardown(async () => await app.close())

  const form = await formLogin(app, ADMIN)
  const cookieToken = sessionCookie(form)!.value
  const token = await loginToken(app)
  await apiLogin(app, { username: ADMIN.username, password: 'wrong-password-1234' })
  await logout(app, token, { cookie: `${SESSION_COOKIE}=${cookieToken}` })
  // What a careless log call would write: redaction must catch it.
  app.log.info({
    req: { headers: { 'x-service-token': token, cookie: `${SESSION_COOKIE}=${cookieToken}`, authorization: `Bearer ${token}` } },
    headers: { 'x-service-token': token, cookie: cookieToken },
    body: { username: ADMIN.username, password: ADMIN.password },
    password: ADMIN.password,
    token
  }, 'probe')

  const output = lines.join('')
  t.match(output, /logged in/, 'the logins were logged')
  t.match(output, /logged out/)
  const probe = lines.find((l) => l.includes('"probe"'))
  t.ok(probe, 'the probe line was written')
  t.match(probe, /\[redacted\]/)
  for (const secret of [ADMIN.password, 'wrong-password-1234', token, cookieToken]) {
    t.notOk(output.includes(secret), `${secret.slice(0, 6)}… does not appear`)
  }
})
