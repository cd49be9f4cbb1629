/**
 * What only a browser proves: the login round trip, the token helper under the app's CSP, the
 * policy itself (allowed vs blocked origins, violation reports, inline styles), in real headless
 * Chromium driven by playwright-core. Everything listens on 127.0.0.1 only.
 */
import fs from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import t from 'tap'
import { browserSkip, launchChromium } from '../helpers/browser.js'
import { build } from '../helpers/app.js'
import type { TestContext } from '../helpers/test-context.js'
import { deadline, waitFor } from '../helpers/timing.js'
import { sessionToken } from '../helpers/auth.js'
import { SESSION_COOKIE } from '../../src/auth/types.js'
import { writeApp } from '../helpers/app-ui.js'
import { ARTIFACTS_DIR, EXAMPLE_APPS_DIR } from '../helpers/paths.js'

const skip = browserSkip()
const USER = { username: 'browser-admin', password: 'a long enough password' }

/** A tiny script server on its own port (another origin); counts what it was asked for. */
async function scriptServer (t: TestContext, body: string): Promise<{ origin: string, hits: string[] }> {
  const hits: string[] = []
  const server = http.createServer((req, res) => {
    hits.push(req.url ?? '')
    res.writeHead(200, { 'content-type': 'text/javascript' })
    res.end(body)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => await new Promise<void>((resolve) => server.close(() => resolve())))
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits }
}

function page (allowed: string, blocked: string): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Browser fixture</title>
  <style>#styled-block { background-color: rgb(0, 128, 0); }</style>
  <script src="app.js"></script>
  <script src="${allowed}/lib/allowed.js"></script>
  <script src="${blocked}/lib/blocked.js"></script>
  <script>window.inlineScriptRan = true</script>
</head>
<body>
  <h1>Reaktor app UI</h1>
  <p id="styled" style="color: rgb(255, 0, 0)">Inline style attribute</p>
  <p id="styled-block">Style element</p>
  <p>Token helper: <span id="token-state">…</span></p>
  <p>API call with X-Service-Token: <span id="api-status">…</span></p>
</body>
</html>
`
}

// Runs before the other scripts of the page: it sees the helper (injected first) and records
// violations from the start.
const APP_JS = `
window.violations = [];
document.addEventListener('securitypolicyviolation', function (e) {
  window.violations.push({ blockedURI: e.blockedURI, directive: e.effectiveDirective });
});
window.helperAtStart = typeof window.getServiceAuthToken;
window.apiCall = fetch('/api/v1/polling', { headers: { 'X-Service-Token': getServiceAuthToken() } })
  .then(function (res) { return res.status; });
window.addEventListener('DOMContentLoaded', function () {
  document.getElementById('token-state').textContent = getServiceAuthToken() ? 'present' : 'absent';
  window.apiCall.then(function (status) { document.getElementById('api-status').textContent = String(status); });
});
`

t.test('a browser session through the app UI', { skip }, async (t) => {
  const allowed = await scriptServer(t, 'window.allowedScriptRan = true;')
  const blocked = await scriptServer(t, 'window.blockedScriptRan = true;')
  const def = await writeApp(t, 'browser-demo', '1.0.0', {
    'public/index.html': page(allowed.origin, blocked.origin),
    'public/app.js': APP_JS,
    // A full URL: the server reduces it to its origin.
    'public/.service-external-resources.json': JSON.stringify({ allowedOrigins: [`${allowed.origin}/lib/allowed.js`] })
  })
  const app = await build(t, { apps: [def], env: { ADMIN_USERNAME: USER.username, ADMIN_PASSWORD: USER.password } })
  const origin = await app.listen({ port: 0, host: '127.0.0.1' })
  const appUrl = `${origin}/app-ui/browser-demo@1.0.0/?view=main`

  const browser = await launchChromium(t)
  const context = await browser.newContext()
  const tab = await context.newPage()
  const consoleErrors: string[] = []
  tab.on('console', (msg) => { if (msg.type() === 'error') consoleErrors.push(msg.text()) })

  // Not logged in: the app sends the browser to the login form, which brings it back.
  await tab.goto(appUrl)
  t.equal(new URL(tab.url()).pathname, '/login', 'redirected to the login page')
  t.equal(new URL(tab.url()).searchParams.get('redirect'), '/app-ui/browser-demo@1.0.0/?view=main')
  await tab.fill('input[name="username"]', USER.username)
  await tab.fill('input[name="password"]', USER.password)
  const posts: string[] = []
  tab.on('response', (r) => { if (r.request().method() === 'POST') posts.push(`${r.status()} ${r.url()}`) })
  await Promise.all([
    tab.waitForURL((url) => url.pathname.startsWith('/app-ui/'), { timeout: deadline(20_000) }),
    tab.click('[type="submit"]')
  ]).catch(async (err) => {
    t.comment(`login did not land on the app: ${posts.join(', ')} ${await tab.content()}`)
    throw err
  })
  t.equal(tab.url(), appUrl, 'after login the user lands on the same app page, query included')
  await tab.waitForFunction(() => document.getElementById('api-status')?.textContent !== '…', undefined, { timeout: deadline(10_000) })

  // The token helper: defined before the app's own scripts, returns the live session token.
  t.equal(await tab.evaluate(() => (window as any).helperAtStart), 'function', 'defined before the app script ran')
  const token = await tab.evaluate(() => (window as any).getServiceAuthToken())
  t.type(token, 'string')
  t.ok(await app.sessions.verify(token), 'the helper returns a live session token')
  t.equal(await tab.textContent('#token-state'), 'present')

  // An app script calls the API with the token.
  t.equal(await tab.evaluate(async () => await (window as any).apiCall), 200, "an app script's fetch with X-Service-Token is accepted")
  t.equal(await tab.textContent('#api-status'), '200')

  // CSP: the listed origin loads, the unlisted one is blocked and reported; no inline script runs.
  t.equal(await tab.evaluate(() => (window as any).allowedScriptRan), true, 'a script from an allowed origin runs')
  t.equal(await tab.evaluate(() => (window as any).blockedScriptRan), undefined, 'a script from another origin does not')
  t.same(blocked.hits, [], 'the browser never even asked the unlisted origin')
  t.same(allowed.hits, ['/lib/allowed.js'])
  const violations = await waitFor(async () => {
    const v = await tab.evaluate(() => (window as any).violations as Array<{ blockedURI: string, directive: string }>)
    return v.length >= 2 ? v : undefined
  }, { what: 'violation reports' })
  t.ok(violations.some((v) => v.blockedURI === `${blocked.origin}/lib/blocked.js` && v.directive === 'script-src-elem'), 'the blocked script is reported')
  t.ok(violations.some((v) => v.blockedURI === 'inline'), 'the inline script is reported')
  t.equal(await tab.evaluate(() => (window as any).inlineScriptRan), undefined, "inline scripts need more than the helper's hash")
  t.ok(consoleErrors.some((e) => e.includes('Content Security Policy') && e.includes(blocked.origin)), 'the console names the blocked origin')
  t.notOk(consoleErrors.some((e) => e.includes(`'${allowed.origin}/lib/allowed.js'`)), 'no complaint about the allowed script')

  // Inline styles are allowed.
  t.equal(await tab.evaluate(() => getComputedStyle(document.getElementById('styled') as Element).color), 'rgb(255, 0, 0)', 'style attribute applies')
  t.equal(await tab.evaluate(() => getComputedStyle(document.getElementById('styled-block') as Element).backgroundColor), 'rgb(0, 128, 0)', '<style> element applies')

  fs.mkdirSync(ARTIFACTS_DIR, { recursive: true })
  await tab.screenshot({ path: path.join(ARTIFACTS_DIR, 'app-ui.png'), fullPage: true })

  // Logout from the page: without a reload the helper now answers null.
  const logout = await tab.evaluate(async () => (await fetch('/api/v1/auth/logout', { method: 'POST', headers: { 'X-Service-Token': (window as any).getServiceAuthToken() } })).status)
  t.equal(logout, 200)
  t.equal(await tab.evaluate(() => (window as any).getServiceAuthToken()), null, 'null after logout, same page')
  t.equal(await app.sessions.verify(token), null, 'the session is revoked')
  const after = await tab.evaluate(async () => (await fetch('/api/v1/polling', { headers: { 'X-Service-Token': String((window as any).getServiceAuthToken()) } })).status)
  t.equal(after, 401, 'the API refuses the old page now')

  await tab.goto(appUrl)
  t.equal(new URL(tab.url()).pathname, '/login', 'reopening the app asks for a login again')
})

// Prologues a pattern match misreads: a '>' inside a quoted attribute value (of <html> or <head>)
// and the empty comment '<!-->', followed later by a comment that a scan for '-->' would run to.
const PROLOGUE_PAGES: Record<string, string> = {
  'html-attr.html': '<!DOCTYPE html>\n<html lang="en" data-x="a>b">\n<head><script src="probe.js"></script><title>t</title></head><body></body></html>',
  'head-attr.html': '<!DOCTYPE html>\n<html lang="en"><HEAD data-x=">"><script src="probe.js"></script><title>t</title></HEAD><body></body></html>',
  'empty-comment.html': '<!DOCTYPE html>\n<!--><html lang="en"><head><script src="probe.js"></script><title>t</title></head><body><!-- a later comment --></body></html>'
}

t.test('the token helper runs first in pages whose prologue a pattern match misreads', { skip }, async (t) => {
  const def = await writeApp(t, 'prologue-demo', '1.0.0', {
    ...Object.fromEntries(Object.entries(PROLOGUE_PAGES).map(([name, html]) => [`public/${name}`, html])),
    'public/probe.js': 'window.helperAtStart = typeof window.getServiceAuthToken;'
  })
  const app = await build(t, { apps: [def] })
  const origin = await app.listen({ port: 0, host: '127.0.0.1' })
  const token = await sessionToken(app)
  const browser = await launchChromium(t)
  const context = await browser.newContext()
  await context.addCookies([{ name: SESSION_COOKIE, value: token, url: origin }])
  const tab = await context.newPage()
  // The favicon's 404 is the one console error expected: there is none in public/.
  const errors: string[] = []
  tab.on('console', (msg) => { if (msg.type() === 'error' && !msg.location().url.endsWith('/favicon.ico')) errors.push(msg.text()) })
  tab.on('pageerror', (err) => errors.push(err.message))
  for (const name of Object.keys(PROLOGUE_PAGES)) {
    const res = await tab.goto(`${origin}/app-ui/prologue-demo@1.0.0/${name}`)
    t.equal(res?.status(), 200, name)
    const seen = await tab.evaluate(() => ({
      helperAtStart: (window as any).helperAtStart,
      token: typeof (window as any).getServiceAuthToken === 'function' ? (window as any).getServiceAuthToken() : undefined,
      htmlAttr: document.documentElement.getAttribute('data-x'),
      headAttr: document.head.getAttribute('data-x'),
      mode: document.compatMode,
      text: document.body.textContent
    }))
    t.equal(seen.helperAtStart, 'function', `${name}: the helper is defined before the page's first script`)
    t.equal(seen.token, token, `${name}: the helper returns the session token`)
    t.equal(seen.mode, 'CSS1Compat', `${name}: standards mode (nothing went before the doctype)`)
    t.equal(seen.text, '', `${name}: no script text leaked into the page`)
    if (name === 'html-attr.html') t.equal(seen.htmlAttr, 'a>b', 'the <html> attribute is intact')
    if (name === 'head-attr.html') t.equal(seen.headAttr, '>', 'the <head> attribute is intact')
  }
  t.same(errors, [], 'no script error and no policy violation')
})

const EXAMPLE_APP = path.join(EXAMPLE_APPS_DIR, 'drain-demo')

t.test('the example app shipped in reaktor-apps/ works under its policy', { skip }, async (t) => {
  const app = await build(t, { env: { REAKTOR_APPS_DIR: path.dirname(EXAMPLE_APP), ADMIN_USERNAME: USER.username, ADMIN_PASSWORD: USER.password } })
  const example = app.apps.apps.find((a) => a.dir !== undefined && path.resolve(a.dir) === EXAMPLE_APP)
  if (example === undefined) {
    t.fail('the example app did not load')
    return
  }
  const origin = await app.listen({ port: 0, host: '127.0.0.1' })
  const browser = await launchChromium(t)
  const tab = await (await browser.newContext()).newPage()
  const cspErrors: string[] = []
  tab.on('console', (msg) => { if (msg.type() === 'error' && msg.text().includes('Content Security Policy')) cspErrors.push(msg.text()) })
  const apiStatuses: number[] = []
  tab.on('response', (r) => { if (new URL(r.url()).pathname.startsWith('/api/v1/')) apiStatuses.push(r.status()) })

  await tab.goto(`${origin}/app-ui/${example.name}@${example.version}/`)
  await tab.fill('input[name="username"]', USER.username)
  await tab.fill('input[name="password"]', USER.password)
  await Promise.all([
    tab.waitForURL((url) => url.pathname.startsWith('/app-ui/'), { timeout: deadline(20_000) }),
    tab.click('[type="submit"]')
  ])
  t.equal(await tab.evaluate(() => typeof (window as any).getServiceAuthToken()), 'string', 'the helper has the session')
  await waitFor(() => apiStatuses.length > 0, { what: 'the example UI to call the API' })
  t.ok(apiStatuses.every((s) => s < 400), `its API calls succeed (${apiStatuses.join(', ')})`)
  t.same(cspErrors, [], 'no policy violations in the example app')
  fs.mkdirSync(ARTIFACTS_DIR, { recursive: true })
  await tab.screenshot({ path: path.join(ARTIFACTS_DIR, 'example-app.png'), fullPage: true })
})
