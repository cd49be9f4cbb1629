/**
 * `POST /logout`, the browser's sign-out: it ends the session of the session cookie on every node,
 * clears the cookie and lands on the login page; a cross-site post and a GET sign nobody out.
 */
import { createHash } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { SESSION_COOKIE } from '../../src/auth/types.js'
import { ADMIN, ADMIN_ENV, formLogin, sessionCookie, sessionToken, twoNodes, untilCached, whoami } from '../helpers/auth.js'
import { build } from '../helpers/app.js'
import { bound, waitFor } from '../helpers/timing.js'

/** `POST /logout` as the home page's form sends it (no fields), with the session cookie if any. */
async function formLogout (app: FastifyInstance, cookie: string | undefined, headers: Record<string, string> = {}) {
  return await app.inject({
    method: 'POST',
    url: '/logout',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    cookies: cookie === undefined ? {} : { [SESSION_COOKIE]: cookie },
    payload: ''
  })
}

async function signIn (app: FastifyInstance): Promise<string> {
  const cookie = sessionCookie(await formLogin(app, ADMIN))?.value
  if (cookie === undefined) throw new Error('the form login set no cookie')
  return cookie
}

async function auditRows (app: FastifyInstance) {
  return await app.db.selectFrom('audit').select(['action', 'actor', 'targets', 'details']).where('action', '=', 'auth.logout').execute()
}

t.test('POST /logout revokes the cookie\'s session, clears the cookie, audits, and lands on /login', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const cookie = await signIn(app)
  t.equal((await whoami(app, cookie)).statusCode, 200, 'the session is live before')

  // What Chromium sends for the home page's own form.
  const res = await formLogout(app, cookie, { origin: 'http://localhost', 'sec-fetch-site': 'same-origin' })
  t.equal(res.statusCode, 303)
  t.equal(res.headers.location, '/login')
  t.equal(res.headers['cache-control'], 'no-store')
  const cleared = res.cookies.find((c) => c.name === SESSION_COOKIE)
  t.ok(cleared, 'the answer clears the session cookie')
  t.equal(cleared?.value, '')
  t.equal(cleared?.path, '/', 'on the path the login set it, or the browser would keep it')
  t.ok(cleared?.expires !== undefined && cleared.expires.getTime() <= Date.now(), 'expired')

  t.equal((await whoami(app, cookie)).statusCode, 401, 'the session is revoked')
  const row = await app.db.selectFrom('sessions').select('revoked_at').where('token_hash', '=', createHash('sha256').update(cookie).digest()).executeTakeFirstOrThrow()
  t.ok(row.revoked_at, 'revoked in the database, not only forgotten by the browser')
  t.same(await auditRows(app), [{ action: 'auth.logout', actor: ADMIN.username, targets: [ADMIN.username], details: { via: 'browser' } }])

  // Once more with the dead cookie (a second tab's button): the login page again, nothing audited.
  const again = await formLogout(app, cookie)
  t.equal(again.statusCode, 303)
  t.equal(again.headers.location, '/login')
  t.equal((await auditRows(app)).length, 1)
})

t.test('POST /logout without a cookie (or a curl without a body) still lands on /login', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const plain = await app.inject({ method: 'POST', url: '/logout' })
  t.equal(plain.statusCode, 303)
  t.equal(plain.headers.location, '/login')
  const form = await formLogout(app, undefined, { 'sec-fetch-site': 'same-origin' })
  t.equal(form.statusCode, 303)
  t.equal(form.headers.location, '/login')
  t.same(await auditRows(app), [], 'nobody signed out, nothing audited')
})

t.test('a cross-site POST /logout is refused (403) and signs nobody out', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const cookie = await signIn(app)
  const refused: Array<Record<string, string>> = [
    { 'sec-fetch-site': 'cross-site' },
    { origin: 'https://evil.example' },
    { origin: 'null' },
    { origin: 'https://evil.example', 'sec-fetch-site': 'same-site' },
    { origin: 'http://localhost', 'sec-fetch-site': 'cross-site' }
  ]
  for (const headers of refused) {
    const res = await formLogout(app, cookie, headers)
    t.equal(res.statusCode, 403, JSON.stringify(headers))
    t.same(res.json(), { statusCode: 403, error: 'Forbidden', message: 'Cross-site logout request rejected' })
    t.equal(res.headers['set-cookie'], undefined, 'the cookie is left alone')
  }
  t.equal((await whoami(app, cookie)).statusCode, 200, 'the session is still live')
  t.same(await auditRows(app), [])
})

t.test('GET /logout signs nobody out', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const cookie = await signIn(app)
  const res = await app.inject({ method: 'GET', url: '/logout', cookies: { [SESSION_COOKIE]: cookie } })
  t.equal(res.statusCode, 404)
  t.equal(res.headers['set-cookie'], undefined)
  t.equal((await whoami(app, cookie)).statusCode, 200, 'the session is still live')
})

t.test('a sign-out on one node ends the session on another node that had it cached, within 1 s', async (t) => {
  const [nodeA, nodeB] = await twoNodes(t)
  const cookie = await signIn(nodeA)
  // Node B answers from its cache, where only a revocation notice can end the session.
  await untilCached(nodeB, cookie, 'the session on node B')

  const res = await formLogout(nodeA, cookie, { 'sec-fetch-site': 'same-origin' })
  t.equal(res.statusCode, 303)
  const answered = performance.now()
  // The promise is 1 s.
  await waitFor(async () => (await whoami(nodeB, cookie)).statusCode === 401, { timeoutMs: bound(1000, 'second'), intervalMs: 10, what: 'node B to refuse the session' })
  const ms = performance.now() - answered
  t.comment(`node B refused the signed-out session ${ms.toFixed(0)} ms after node A answered the sign-out`)
})

t.test('with a planted second session cookie, a sign-out still ends the browser\'s own session (and the planted one)', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const own = await signIn(app)
  // Another account's live session, as a sibling subdomain could plant it on a longer path.
  const planted = await sessionToken(app, 'planted-owner')
  const res = await app.inject({
    method: 'POST',
    url: '/logout',
    headers: { cookie: `${SESSION_COOKIE}=${planted}; ${SESSION_COOKIE}=${own}`, 'sec-fetch-site': 'same-origin' }
  })
  t.equal(res.statusCode, 303)
  t.equal((await whoami(app, own)).statusCode, 401, 'the own session is revoked')
  t.equal((await whoami(app, planted)).statusCode, 401, 'the planted one too: nothing the cookie named stays live')
  t.same((await auditRows(app)).map((r) => r.actor).sort(), [ADMIN.username, 'planted-owner'].sort())
})

t.test('the home page has a sign-out button, and its policy allows exactly that form post', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const cookie = await signIn(app)
  const home = await app.inject({ method: 'GET', url: '/', cookies: { [SESSION_COOKIE]: cookie } })
  t.equal(home.statusCode, 200)
  t.match(home.body, /<form class="sign-out" method="post" action="\/logout"><button type="submit">Sign out<\/button><\/form>/)
  const csp = String(home.headers['content-security-policy'])
  const directives = new Map(csp.split(';').map((d) => d.trim().split(/\s+/)).map(([k, ...v]) => [k, v.join(' ')]))
  t.same([...directives.keys()].sort(), ['base-uri', 'default-src', 'form-action', 'frame-ancestors', 'script-src', 'style-src'])
  // The policy is the login page's, whose one script it allows by hash; the home page carries none.
  t.notMatch(home.body, /<script/i)
  t.equal(directives.get('form-action'), "'self'")
  t.equal(directives.get('default-src'), "'none'")
  const style = /<style>([\s\S]*?)<\/style>/.exec(home.body)?.[1] ?? ''
  t.equal(directives.get('style-src'), `'sha256-${createHash('sha256').update(style).digest('base64')}'`, 'the stylesheet with the button\'s rules is the one allowed')
})
