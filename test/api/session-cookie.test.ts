/**
 * The browser session cookie against planted duplicates, its `__Host-` name over https, HSTS only
 * on https, and the ALLOWED_HOSTS list against DNS rebinding.
 */
import t from 'tap'
import { SECURE_SESSION_COOKIE, SESSION_COOKIE } from '../../src/auth/types.js'
import { build } from '../helpers/app.js'
import { writeApp } from '../helpers/app-ui.js'
import { ADMIN, ADMIN_ENV, formLogin, logout, sessionToken } from '../helpers/auth.js'

const HTTPS = { 'x-forwarded-proto': 'https' }

t.test('duplicate session cookies: a planted value never overrides the valid one; two live ones count as none', async (t) => {
  const def = await writeApp(t, 'cookie-demo', '1.0.0', { 'public/index.html': '<!DOCTYPE html><html><head></head><body>ok</body></html>' })
  const app = await build(t, { env: ADMIN_ENV, apps: [def] })
  const valid = await sessionToken(app, 'victim')
  const attackers = await sessionToken(app, 'attacker')
  const home = async (cookie: string): Promise<number> => (await app.inject({ method: 'GET', url: '/', headers: { cookie } })).statusCode
  const ui = async (cookie: string): Promise<number> => (await app.inject({ method: 'GET', url: '/app-ui/cookie-demo@1.0.0/', headers: { cookie } })).statusCode

  // A browser sends the cookie with the longer path first: a planted one leads.
  for (const planted of ['garbage', 'A'.repeat(43), '']) {
    const cookie = `${SESSION_COOKIE}=${planted}; ${SESSION_COOKIE}=${valid}`
    t.equal(await home(cookie), 200, `home page with ${JSON.stringify(planted)} planted before the valid cookie`)
    t.equal(await ui(cookie), 200, `app UI with ${JSON.stringify(planted)} planted (first request)`)
    t.equal(await ui(cookie), 200, `app UI with ${JSON.stringify(planted)} planted (served from memory)`)
    t.equal(await home(`${SESSION_COOKIE}=${valid}; ${SESSION_COOKIE}=${planted}`), 200, 'in either order')
  }
  // The answer expires the duplicates wherever they may sit (never the real cookie: host-only, Path=/).
  const cleared = await app.inject({ method: 'GET', url: '/app-ui/cookie-demo@1.0.0/index.html?x=1', headers: { host: 'ui.corp.example:8080', cookie: `${SESSION_COOKIE}=garbage; ${SESSION_COOKIE}=${valid}` } })
  t.equal(cleared.statusCode, 200)
  const scopes = cleared.cookies.map((c) => `${c.name}=${c.value} ${String(c.domain ?? 'host')} ${String(c.path)} ${String(c.maxAge)}`)
  t.same(scopes.filter((c) => !c.endsWith(' 0')), [], 'every Set-Cookie of the answer expires')
  for (const path of ['/app-ui', '/app-ui/', '/app-ui/cookie-demo@1.0.0', '/app-ui/cookie-demo@1.0.0/', '/app-ui/cookie-demo@1.0.0/index.html']) {
    t.ok(scopes.includes(`${SESSION_COOKIE}= host ${path} 0`), `expires a planted cookie at ${path}`)
  }
  t.ok(scopes.includes(`${SESSION_COOKIE}= corp.example / 0`), 'and one planted from a sibling on the parent domain')
  t.notOk(scopes.includes(`${SESSION_COOKIE}= host / 0`), 'never the real cookie')
  t.equal((await app.inject({ method: 'GET', url: '/', headers: { cookie: `${SESSION_COOKIE}=${valid}` } })).headers['set-cookie'], undefined, 'one cookie: nothing to expire')

  // Someone else's live session planted next to the user's: neither is used (the user logs in again).
  const both = `${SESSION_COOKIE}=${attackers}; ${SESSION_COOKIE}=${valid}`
  t.equal(await home(both), 302)
  t.equal(await ui(both), 302)
  t.equal(await home(`${SESSION_COOKIE}=${attackers}`), 200, 'alone, the other session is fine')
  // Over plain http the __Host- name means nothing to the service, and over https the plain name.
  t.equal(await home(`${SECURE_SESSION_COOKIE}=${valid}`), 302)
})

t.test('over https only __Host-reaktor_session counts: a plain reaktor_session cookie (plantable) is ignored', async (t) => {
  const app = await build(t, { env: { ...ADMIN_ENV, TRUST_PROXY: 'true' } })
  const login = await formLogin(app, ADMIN, HTTPS)
  const token = login.cookies.find((c) => c.name === SECURE_SESSION_COOKIE)?.value
  t.match(token, /^[A-Za-z0-9_-]{43}$/, 'the login set the __Host- cookie')
  const get = async (cookie: string, headers = HTTPS): Promise<number> => (await app.inject({ method: 'GET', url: '/', headers: { ...headers, cookie } })).statusCode
  t.equal(await get(`${SECURE_SESSION_COOKIE}=${token ?? ''}`), 200)
  t.equal(await get(`${SESSION_COOKIE}=${token ?? ''}`), 302, 'the plain name is not read over https')
  t.equal(await get(`${SESSION_COOKIE}=garbage; ${SECURE_SESSION_COOKIE}=${token ?? ''}`), 200)
  const out = await logout(app, token, { ...HTTPS, cookie: `${SECURE_SESSION_COOKIE}=${token ?? ''}` })
  t.equal(out.statusCode, 200)
  t.match(String(out.headers['set-cookie']), new RegExp(`^${SECURE_SESSION_COOKIE}=;.*Max-Age=0.*Path=/.*Secure`), 'logout clears the __Host- cookie')
})

t.test('HSTS only on https', async (t) => {
  const plain = await build(t, { env: ADMIN_ENV })
  for (const url of ['/login', '/healthz', '/api/v1/polling']) {
    t.equal((await plain.inject({ method: 'GET', url })).headers['strict-transport-security'], undefined, `plain http ${url}`)
    t.equal((await plain.inject({ method: 'GET', url, headers: HTTPS })).headers['strict-transport-security'], undefined, `${url}: X-Forwarded-Proto from an untrusted peer`)
  }
  const proxied = await build(t, { env: { ...ADMIN_ENV, TRUST_PROXY: 'true' } })
  for (const url of ['/login', '/healthz']) {
    t.equal((await proxied.inject({ method: 'GET', url, headers: HTTPS })).headers['strict-transport-security'], 'max-age=31536000; includeSubDomains', `https ${url}`)
    t.equal((await proxied.inject({ method: 'GET', url })).headers['strict-transport-security'], undefined, `http through the proxy ${url}`)
  }
})

t.test('ALLOWED_HOSTS: another Host is answered 421 with the error body; unset, every Host is served', async (t) => {
  const app = await build(t, { env: { ...ADMIN_ENV, ALLOWED_HOSTS: 'service.example, 127.0.0.1:3000,[::1]:3000' } })
  const served = ['service.example', 'SERVICE.example:8443', '127.0.0.1:3000', '[::1]:3000']
  const refused = ['evil.example', 'service.example.evil.example', '127.0.0.1:4000', '127.0.0.1', 'localhost:3000', '[::1]:4000', 'evil.example:3000']
  for (const host of served) {
    t.equal((await app.inject({ method: 'GET', url: '/healthz', headers: { host } })).statusCode, 200, host)
  }
  for (const host of refused) {
    for (const [method, url] of [['GET', '/healthz'], ['GET', '/login'], ['POST', '/api/v1/auth/login'], ['GET', '/nowhere']] as const) {
      const res = await app.inject({ method, url, headers: { host }, payload: method === 'POST' ? ADMIN : undefined })
      t.equal(res.statusCode, 421, `${host} ${method} ${url}`)
      t.same(res.json(), { statusCode: 421, error: 'Misdirected Request', message: `This service does not answer to Host ${JSON.stringify(host)}` })
    }
  }
  t.equal((await app.inject({ method: 'GET', url: '/healthz', headers: { host: 'evil.example', 'x-forwarded-host': 'service.example' } })).statusCode, 421, 'X-Forwarded-Host from an untrusted peer does not help')

  const open = await build(t, { env: ADMIN_ENV })
  t.equal((await open.inject({ method: 'GET', url: '/healthz', headers: { host: 'anything.example' } })).statusCode, 200)
})

t.test('ALLOWED_HOSTS behind a trusted proxy checks the forwarded host', async (t) => {
  const app = await build(t, { env: { ...ADMIN_ENV, ALLOWED_HOSTS: 'service.example', TRUST_PROXY: 'true' } })
  t.equal((await app.inject({ method: 'GET', url: '/healthz', headers: { host: 'internal:3000', 'x-forwarded-host': 'service.example' } })).statusCode, 200)
  t.equal((await app.inject({ method: 'GET', url: '/healthz', headers: { host: 'service.example', 'x-forwarded-host': 'evil.example' } })).statusCode, 421)
})
