import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { SECURE_SESSION_COOKIE, SESSION_COOKIE } from '../../src/auth/types.js'
import { ADMIN, ADMIN_ENV, apiLogin, formLogin, sessionCookie, whoami } from '../helpers/auth.js'
import { build } from '../helpers/app.js'
import { createTestDatabase } from '../helpers/database.js'
import { EXAMPLE_APPS_DIR } from '../helpers/paths.js'
import { probe } from '../helpers/scheduler.js'
import pg from 'pg'

t.test('GET /login serves a self-contained, accessible form under a strict CSP', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const res = await app.inject({ method: 'GET', url: '/login?redirect=' + encodeURIComponent('/app-ui/@acme/widgets@0.1.0/?x=1') })
  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /^text\/html; charset=utf-8/)
  const html = res.body

  t.match(html, /<html lang="en">/)
  t.match(html, /<form method="post" action="\/login"/)
  t.match(html, /<input type="hidden" name="redirect" value="\/app-ui\/@acme\/widgets@0.1.0\/\?x=1">/)
  t.match(html, /<label for="username">[^<]+<\/label>\s*<input type="text" id="username" name="username"[^>]*autocomplete="username"/)
  t.match(html, /<label for="password">[^<]+<\/label>\s*<input type="password" id="password" name="password"[^>]*autocomplete="current-password"/)
  t.match(html, /<button type="submit">/)
  // Self-contained: nothing loaded from anywhere, one inline script (the one that keeps a link's `#…`).
  t.notMatch(html, /<link|<img|src=|https?:\/\//i)
  const scripts = [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1])
  t.equal(scripts.length, 1, 'one script')
  t.equal(html.match(/<script/g)?.length, 1, 'and no other script element')

  const csp = String(res.headers['content-security-policy'])
  const directives = new Map(csp.split(';').map((d) => d.trim().split(/\s+/)).map(([k, ...v]) => [k, v.join(' ')]))
  t.equal(directives.get('default-src'), "'none'")
  t.equal(directives.get('form-action'), "'self'")
  t.equal(directives.get('frame-ancestors'), "'none'")
  t.equal(directives.get('base-uri'), "'none'")
  t.notMatch(csp, /unsafe-inline|unsafe-eval/)
  t.equal(directives.get('script-src'), `'sha256-${createHash('sha256').update(scripts[0]).digest('base64')}'`, 'the script is allowed by its hash, nothing else is')
  // The one inline stylesheet is allowed by its hash, so the page renders styled under its own CSP.
  const style = /<style>([\s\S]*?)<\/style>/.exec(html)?.[1] ?? ''
  t.ok(style.length > 0, 'the page has its stylesheet inline')
  t.equal(directives.get('style-src'), `'sha256-${createHash('sha256').update(style).digest('base64')}'`)
  t.equal(res.headers['cache-control'], 'no-store')
  t.equal(res.headers['x-frame-options'], 'DENY')
  t.equal(res.headers['referrer-policy'], 'same-origin')
})

t.test('GET /login never reflects an unsafe redirect into the page', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  for (const redirect of ['"><script>alert(1)</script>', '//evil.example', 'javascript:alert(1)']) {
    const res = await app.inject({ method: 'GET', url: '/login?redirect=' + encodeURIComponent(redirect) })
    t.equal(res.statusCode, 200)
    t.match(res.body, /<input type="hidden" name="redirect" value="\/">/, redirect)
    t.notMatch(res.body, /alert\(1\)|evil\.example|javascript:/, redirect)
    t.equal(res.body.match(/<script/g)?.length, 1, `${redirect}: the page's own script only`)
  }
  const none = await app.inject({ method: 'GET', url: '/login' })
  t.match(none.body, /name="redirect" value="\/"/)
})

t.test('POST /login sets the session cookie and redirects (303) to the same-origin path', async (t) => {
  const app = await build(t, { whoami: true, env: { ...ADMIN_ENV, SESSION_TTL: '2h' } })
  const res = await formLogin(app, { ...ADMIN, redirect: '/app-ui/@acme/widgets@0.1.0/?x=1' })
  t.equal(res.statusCode, 303)
  t.equal(res.headers.location, '/app-ui/@acme/widgets@0.1.0/?x=1')

  const setCookie = String(res.headers['set-cookie'])
  t.match(setCookie, new RegExp(`^${SESSION_COOKIE}=[A-Za-z0-9_-]{43};`))
  t.match(setCookie, /; Max-Age=7200(;|$)/)
  t.match(setCookie, /; Path=\/(;|$)/)
  t.match(setCookie, /; SameSite=Lax(;|$)/)
  // Plain HTTP: a Secure cookie would never come back. Not HttpOnly: the app-UI helper reads it.
  t.notMatch(setCookie, /Secure/i)
  t.notMatch(setCookie, /HttpOnly/i)

  // The cookie's value is a session token the API accepts in X-Service-Token.
  const token = sessionCookie(res)!.value
  const me = await whoami(app, token)
  t.equal(me.statusCode, 200)
  t.equal(me.json().username, ADMIN.username)
})

t.test('POST /login redirects only to same-origin paths, else to /', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const cases: Array<[string | undefined, string]> = [
    [undefined, '/'],
    ['/app-ui/demo@1.0.0/', '/app-ui/demo@1.0.0/'],
    ['//evil.example', '/'],
    ['/\\evil.example', '/'],
    ['https://evil.example/', '/'],
    ['javascript:alert(1)', '/'],
    ['/..//evil.example', '/'],
    ['/ok\r\nSet-Cookie: planted=1', '/'],
    ['%2F%2Fevil.example', '/']
  ]
  for (const [redirect, expected] of cases) {
    const res = await formLogin(app, { ...ADMIN, ...(redirect === undefined ? {} : { redirect }) })
    t.equal(res.statusCode, 303, JSON.stringify(redirect))
    t.equal(res.headers.location, expected, JSON.stringify(redirect))
  }
})

t.test('wrong credentials: the form again, 401, no cookie, the same answer for unknown users', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const wrongPassword = await formLogin(app, { username: ADMIN.username, password: 'not the password', redirect: '/app-ui/x@1.0.0/' })
  const unknownUser = await formLogin(app, { username: 'mallory', password: 'not the password', redirect: '/app-ui/x@1.0.0/' })
  for (const res of [wrongPassword, unknownUser]) {
    t.equal(res.statusCode, 401)
    t.match(res.headers['content-type'], /^text\/html/)
    t.equal(res.headers['set-cookie'], undefined, 'no cookie')
    t.match(res.body, /<p class="error" id="login-error" role="alert">Invalid username or password\.<\/p>/)
    t.match(res.body, /<form method="post" action="\/login"/)
    t.match(res.body, /name="redirect" value="\/app-ui\/x@1.0.0\/"/, 'the redirect survives the retry')
    t.ok(res.headers['content-security-policy'])
  }
  // Identical pages apart from the username typed in.
  t.equal(wrongPassword.body.replace(ADMIN.username, 'U'), unknownUser.body.replace('mallory', 'U'))
  // No session was created by either attempt.
  t.equal((await app.db.selectFrom('sessions').select('id').execute()).length, 0)
})

t.test('every login issues a new session (no fixation)', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const first = await formLogin(app, ADMIN)
  const firstToken = sessionCookie(first)!.value
  // A browser that already has a session cookie (perhaps planted) and logs in again.
  const second = await formLogin(app, ADMIN, { cookie: `${SESSION_COOKIE}=${firstToken}` })
  t.equal(second.statusCode, 303)
  const secondToken = sessionCookie(second)!.value
  t.not(secondToken, firstToken)
  t.equal((await whoami(app, secondToken)).statusCode, 200)
  t.equal((await app.db.selectFrom('sessions').select('id').execute()).length, 2)
})

t.test('over HTTPS through a trusted proxy the cookie is __Host-reaktor_session, Secure; on plain http reaktor_session', async (t) => {
  const trusted = await build(t, { env: { ...ADMIN_ENV, TRUST_PROXY: 'true' } })
  const viaProxy = await formLogin(trusted, ADMIN, { 'x-forwarded-proto': 'https' })
  t.equal(viaProxy.statusCode, 303)
  const secure = String(viaProxy.headers['set-cookie'])
  // What browsers require of a __Host- cookie: Secure, Path=/, no Domain.
  t.match(secure, new RegExp(`^${SECURE_SESSION_COOKIE}=[A-Za-z0-9_-]{43};`))
  t.match(secure, /; Secure(;|$)/)
  t.match(secure, /; Path=\/(;|$)/)
  t.notMatch(secure, /Domain=/i)

  const untrusted = await build(t, { env: ADMIN_ENV })
  const spoofed = await formLogin(untrusted, ADMIN, { 'x-forwarded-proto': 'https' })
  t.equal(spoofed.statusCode, 303)
  t.match(String(spoofed.headers['set-cookie']), new RegExp(`^${SESSION_COOKIE}=`))
  t.notMatch(String(spoofed.headers['set-cookie']), /Secure/)
})

t.test('login CSRF: a cross-site POST /login is refused with 403', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const refused: Array<Record<string, string>> = [
    { 'sec-fetch-site': 'cross-site' },
    { origin: 'https://evil.example' },
    { origin: 'http://localhost.evil.example' },
    { origin: 'null' },
    { origin: 'https://evil.example', 'sec-fetch-site': 'same-site' },
    // Same host, other scheme: not this origin.
    { origin: 'https://localhost' },
    { origin: 'http://localhost', 'sec-fetch-site': 'cross-site' }
  ]
  for (const headers of refused) {
    const res = await formLogin(app, ADMIN, headers)
    t.equal(res.statusCode, 403, JSON.stringify(headers))
    // The form again, saying why (a person sees the refusal, not a JSON body).
    t.match(res.headers['content-type'], /^text\/html/)
    t.match(res.body, /role="alert">Cross-site login request rejected</)
    t.match(res.body, /<form method="post" action="\/login"/)
    t.equal(res.headers['set-cookie'], undefined)
  }
  t.equal((await app.db.selectFrom('sessions').select('id').execute()).length, 0, 'no session was created')

  // The service's own page (inject's Host is localhost:80), and clients that send neither header.
  const allowed: Array<Record<string, string>> = [
    { origin: 'http://localhost', 'sec-fetch-site': 'same-origin' },
    { origin: 'http://localhost:80' },
    { 'sec-fetch-site': 'same-origin' },
    // What Chromium sends for a same-origin post from a page with a strict referrer policy.
    { origin: 'null', 'sec-fetch-site': 'same-origin' },
    { 'sec-fetch-site': 'none' },
    {}
  ]
  for (const headers of allowed) {
    const res = await formLogin(app, ADMIN, headers)
    t.equal(res.statusCode, 303, JSON.stringify(headers))
  }
  const otherHost = await formLogin(app, ADMIN, { host: 'service.example:8443', origin: 'http://service.example:8443' })
  t.equal(otherHost.statusCode, 303, 'the origin is compared with the Host the request came in on')
})

t.test('failed logins are limited per client address (429), spoofed X-Forwarded-For does not help', async (t) => {
  const app = await build(t, { env: { ...ADMIN_ENV, LOGIN_RATE_LIMIT: '1' } })
  // A different username each time, so only the per-address budget (3 × LOGIN_RATE_LIMIT) can trip.
  for (let i = 0; i < 3; i++) {
    const res = await formLogin(app, { username: `guess${i}`, password: 'x' }, { 'x-forwarded-for': `203.0.113.${i + 1}` })
    t.equal(res.statusCode, 401, `attempt ${i + 1}`)
  }
  const limited = await formLogin(app, { username: 'guess99', password: 'x' }, { 'x-forwarded-for': '203.0.113.99' })
  t.equal(limited.statusCode, 429)
  t.match(limited.headers['content-type'], /^text\/html/, 'the form, for the person at it')
  t.match(limited.body, /role="alert">Too many login attempts; retry in \d+ seconds</)
  t.ok(Number(limited.headers['retry-after']) > 0, 'Retry-After says when to come back')
  // That address is refused on both login routes, even with the right password.
  t.equal((await formLogin(app, ADMIN)).statusCode, 429)
  t.equal((await apiLogin(app, ADMIN)).statusCode, 429)
  // Another client address is not affected.
  t.equal((await formLogin(app, ADMIN, {}, '198.51.100.7')).statusCode, 303)
})

t.test('behind a trusted proxy, X-Forwarded-For is the client address the limit counts', async (t) => {
  const app = await build(t, { env: { ...ADMIN_ENV, LOGIN_RATE_LIMIT: '1', TRUST_PROXY: 'true' } })
  // More than the per-address budget (3), each from its own forwarded address.
  for (let i = 0; i < 4; i++) {
    const res = await formLogin(app, { username: `guess${i}`, password: 'x' }, { 'x-forwarded-for': `203.0.113.${i + 1}` })
    t.equal(res.statusCode, 401, `attempt ${i + 1} from its own address`)
  }
  t.equal((await formLogin(app, { username: ADMIN.username, password: 'x' }, { 'x-forwarded-for': '203.0.113.50' })).statusCode, 401)
  t.equal((await formLogin(app, ADMIN, { 'x-forwarded-for': '203.0.113.50' })).statusCode, 429, 'that username from that address')
})

t.test('one address guessing a password never locks the user out elsewhere (TRUST_PROXY, both routes)', async (t) => {
  const app = await build(t, { env: { ...ADMIN_ENV, TRUST_PROXY: 'true' } })
  const attacker = { 'x-forwarded-for': '203.0.113.66' }
  const statuses: number[] = []
  // Ten wrong passwords (LOGIN_RATE_LIMIT), then the attacker keeps going on both routes.
  for (let i = 0; i < 40; i++) {
    const wrong = { username: i % 3 === 0 ? ADMIN.username.toUpperCase() : ADMIN.username, password: `guess ${i}` }
    statuses.push((i % 2 === 0 ? await apiLogin(app, wrong, attacker) : await formLogin(app, wrong, attacker)).statusCode)
    if (i % 10 === 9) {
      // Meanwhile the real user, from their own address, gets in on either route.
      t.equal((await apiLogin(app, ADMIN, { 'x-forwarded-for': '198.51.100.1' })).statusCode, 200, `JSON login after ${i + 1} attacker attempts`)
      t.equal((await formLogin(app, ADMIN, { 'x-forwarded-for': '198.51.100.2' })).statusCode, 303, `form login after ${i + 1} attacker attempts`)
    }
  }
  t.same(statuses.slice(0, 10), Array(10).fill(401), 'the first ten guesses are answered')
  t.same(statuses.slice(10), Array(30).fill(429), 'then that address is refused for that user')
  t.equal((await apiLogin(app, ADMIN, attacker)).statusCode, 429, 'even with the right password from that address')
})

t.test('successful logins never count: a script may log in for every call', async (t) => {
  const app = await build(t, { env: { ...ADMIN_ENV, LOGIN_RATE_LIMIT: '2' } })
  // More than both budgets (2 a minute per user and address, 6 per address).
  for (let i = 0; i < 7; i++) t.equal((await apiLogin(app, ADMIN)).statusCode, 200, `login ${i + 1}`)
  // A success clears that address's failures for that user: typos after it start afresh.
  t.equal((await apiLogin(app, { ...ADMIN, password: 'typo' })).statusCode, 401)
  t.equal((await formLogin(app, ADMIN)).statusCode, 303)
  for (let i = 0; i < 2; i++) t.equal((await apiLogin(app, { ...ADMIN, password: 'typo' })).statusCode, 401, `typo ${i + 1} after the success`)
  t.equal((await apiLogin(app, ADMIN)).statusCode, 429, 'two failures in a row are the budget')
})

t.test('concurrent guesses cannot all pass the check before the first has failed', async (t) => {
  const app = await build(t, { env: { ...ADMIN_ENV, LOGIN_RATE_LIMIT: '5' } })
  const answers = await Promise.all(Array.from({ length: 30 }, async (_, i) => (await apiLogin(app, { ...ADMIN, password: `burst ${i}` }, {}, '192.0.2.9')).statusCode))
  t.equal(answers.filter((s) => s === 401).length, 5, 'exactly LOGIN_RATE_LIMIT guesses are checked')
  t.equal(answers.filter((s) => s === 429).length, 25)
})

t.test('many addresses guessing one username: each guessing address slows to one failure a minute; a clean address still logs in', async (t) => {
  const app = await build(t, { env: { ...ADMIN_ENV, LOGIN_RATE_LIMIT: '2' } })
  // 10 × LOGIN_RATE_LIMIT failures in 15 minutes put the account under attack.
  const guesses = await Promise.all(Array.from({ length: 20 }, async (_, i) => (await apiLogin(app, { ...ADMIN, password: 'x' }, {}, `192.0.2.${100 + i}`)).statusCode))
  t.same(guesses, Array(20).fill(401))
  t.equal((await apiLogin(app, { ...ADMIN, password: 'x' }, {}, '192.0.2.100')).statusCode, 429, 'a guessing address gets no second try this minute')
  t.equal((await apiLogin(app, { ...ADMIN, password: 'x' }, {}, '192.0.2.200')).statusCode, 401, 'a new address gets one')
  t.equal((await apiLogin(app, { ...ADMIN, password: 'x' }, {}, '192.0.2.200')).statusCode, 429, 'and no more')
  t.equal((await apiLogin(app, ADMIN, {}, '198.51.100.20')).statusCode, 200, 'the user from an unrelated address gets in')
  t.equal((await formLogin(app, ADMIN, {}, '198.51.100.21')).statusCode, 303)
  t.equal((await apiLogin(app, { username: 'bob', password: 'x' }, {}, '192.0.2.100')).statusCode, 401, 'other usernames are not under attack')
})

t.test('POST /login with a missing field is a 400 error body, not a crash', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const res = await app.inject({
    method: 'POST',
    url: '/login',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: 'username=alice'
  })
  t.equal(res.statusCode, 400)
  t.same(Object.keys(res.json()).sort(), ['error', 'message', 'statusCode'])
})

t.test('GET / lists the app UIs to a signed-in browser and sends others to the login page', async (t) => {
  const app = await build(t, {
    env: ADMIN_ENV,
    apps: [
      { name: 'with-ui', version: '2.0.0', publicDir: '/nonexistent/public' },
      { name: '@acme/no-ui', version: '1.0.0' }
    ]
  })
  const anonymous = await app.inject({ method: 'GET', url: '/' })
  t.equal(anonymous.statusCode, 302)
  t.equal(anonymous.headers.location, '/login?redirect=%2F')
  const cookie = sessionCookie(await formLogin(app, ADMIN))!.value
  const home = await app.inject({ method: 'GET', url: '/', cookies: { [SESSION_COOKIE]: cookie } })
  t.equal(home.statusCode, 200)
  t.match(home.headers['content-security-policy'], /default-src 'none'/)
  t.match(home.body, /Signed in as <strong>alice<\/strong>/)
  t.match(home.body, /<a href="\/app-ui\/with-ui@2\.0\.0\/">with-ui<\/a> 2\.0\.0/)
  t.match(home.body, /<li>@acme\/no-ui 1\.0\.0 — no polling reaktor, no UI<\/li>/, 'an app without a UI: listed apart, not linked')
  t.notMatch(home.body, /href="[^"]*no-ui/)
  t.notMatch(home.body, /Open the console/, 'no console app loaded: no console entry')
})

t.test('GET / opens with the console, then the other app UIs, then the apps without a UI and their reaktor counts', async (t) => {
  const app = await build(t, {
    env: ADMIN_ENV,
    apps: [
      { name: 'beta-ui', version: '1.2.0', publicDir: '/nonexistent/public' },
      { name: 'reaktor-console', version: '1.9.0', publicDir: '/nonexistent/public' },
      { name: 'reaktor-console', version: '1.10.0', publicDir: '/nonexistent/public' },
      { name: 'heartbeat', version: '1.0.0', pollingReaktors: [probe('beat', () => false, { interval: '1h' }).registration] },
      { name: 'sync', version: '3.0.0', pollingReaktors: [probe('sync-a', () => false, { interval: '1h' }).registration, probe('sync-b', () => false, { interval: '1h' }).registration] }
    ]
  })
  const cookie = sessionCookie(await formLogin(app, ADMIN))!.value
  const home = await app.inject({ method: 'GET', url: '/', cookies: { [SESSION_COOKIE]: cookie } })
  t.equal(home.statusCode, 200)
  const html = home.body
  const links = [...html.matchAll(/<a [^>]*href="([^"]+)"[^>]*>([^<]*)<\/a>/g)].map((m) => [m[1], m[2]])
  t.same(links, [
    ['/app-ui/reaktor-console@1.10.0/', 'Open the console'],
    ['/app-ui/beta-ui@1.2.0/', 'beta-ui'],
    ['/app-ui/reaktor-console@1.9.0/', 'reaktor-console'],
    ['/docs', 'API documentation']
  ], 'the console first (its newest version; an older one stays among the other UIs), the other UIs, the API docs')
  t.match(html, /<a class="console" href="\/app-ui\/reaktor-console@1\.10\.0\/">Open the console<\/a>/, 'styled as a button')
  const items = [...html.matchAll(/<li>([^<]*)<\/li>/g)].map((m) => m[1])
  t.same(items, ['heartbeat 1.0.0 — 1 polling reaktor, no UI', 'sync 3.0.0 — 2 polling reaktors, no UI'])
  t.ok(html.indexOf('Open the console') < html.indexOf('beta-ui') && html.indexOf('beta-ui') < html.indexOf('heartbeat'), 'in that order')
  // The same strict page: no script at all, the policy of the login page.
  t.notMatch(html, /<script|<link|<img|src=|https?:\/\//i)
  const login = await app.inject({ method: 'GET', url: '/login' })
  t.equal(home.headers['content-security-policy'], login.headers['content-security-policy'])
  // The policy allows no script but the login page's own, by its hash, which this page does not carry.
  t.notMatch(String(home.headers['content-security-policy']), /unsafe-inline/)
  const style = /<style>([\s\S]*?)<\/style>/.exec(html)?.[1] ?? ''
  t.match(home.headers['content-security-policy'], `style-src 'sha256-${createHash('sha256').update(style).digest('base64')}'`, 'its stylesheet allowed by hash')
})

t.test('GET / with the example apps: the console app of the repository is the first entry', async (t) => {
  const app = await build(t, { env: { REAKTOR_APPS_DIR: EXAMPLE_APPS_DIR, ...ADMIN_ENV } })
  const cookie = sessionCookie(await formLogin(app, ADMIN))!.value
  const html = (await app.inject({ method: 'GET', url: '/', cookies: { [SESSION_COOKIE]: cookie } })).body
  const { version } = JSON.parse(await readFile(path.join(EXAMPLE_APPS_DIR, 'reaktor-console', 'package.json'), 'utf8')) as { version: string }
  t.match(html, new RegExp(`<a class="console" href="/app-ui/reaktor-console@${version.replace(/\./g, '\\.')}/">Open the console</a>`))
  t.match(html, /<a href="\/app-ui\/drain-demo@[^"]+\/">drain-demo<\/a>/)
  t.match(html, /<li>heartbeat [^ ]+ — 1 polling reaktor, no UI<\/li>/)
  const opened = await app.inject({ method: 'GET', url: `/app-ui/reaktor-console@${version}/`, cookies: { [SESSION_COOKIE]: cookie } })
  t.equal(opened.statusCode, 200, 'the link opens the console')
})

t.test('GET /login with a repeated redirect parameter still serves the form (redirect /)', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const res = await app.inject({ method: 'GET', url: '/login?redirect=/a&redirect=/b' })
  t.equal(res.statusCode, 200)
  t.match(res.body, /name="redirect" value="\/"/)
})

t.test('a login the database could not answer (503) does not count: a client retrying through an outage is not locked out after it', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const app = await build(t, { databaseUrl, env: { ...ADMIN_ENV, LOGIN_RATE_LIMIT: '2' } })
  // The outage: another session holds the users table, so the lookup runs into statement_timeout.
  const holder = new pg.Client({ connectionString: databaseUrl })
  await holder.connect()
  t.teardown(async () => await holder.end())
  await holder.query('begin')
  await holder.query('lock table users in access exclusive mode')
  const during = await Promise.all([apiLogin(app, ADMIN), formLogin(app, ADMIN)])
  t.same(during.map((r) => r.statusCode), [503, 503], 'both routes: 503 while the database cannot answer')
  await holder.query('rollback')
  t.equal((await apiLogin(app, ADMIN)).statusCode, 200, 'the right password gets in once the database answers')
  t.equal((await apiLogin(app, { ...ADMIN, password: 'wrong' })).statusCode, 401, 'and real failures still count from zero')
})
