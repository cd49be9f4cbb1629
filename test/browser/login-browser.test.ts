/**
 * The login page in a real headless Chromium: its CSP lets its own stylesheet through and nothing
 * else breaks, the form logs in and lands on the redirect target with the cookie the app-UI helper
 * reads, and a cross-site form post is refused by the browser-sent headers.
 */
import t from 'tap'
import { browserTests, CROSS_SITE_FLAG, crossSitePage, listeningApp } from '../helpers/browser.js'
import { SESSION_COOKIE } from '../../src/auth/types.js'
import { ADMIN, ADMIN_ENV } from '../helpers/auth.js'
import type { TestContext } from '../helpers/test-context.js'

browserTests((browser) => {

  async function startService (t: TestContext): Promise<string> {
    return (await listeningApp(t, { env: ADMIN_ENV })).base
  }

  t.test('the login page renders under its CSP, logs in and returns to the redirect path', async (t) => {
    const base = await startService(t)
    const context = await browser.newContext()
    t.teardown(async () => await context.close())
    const page = await context.newPage()
    const problems: string[] = []
    // HTTP errors (the deliberate 401, the favicon's 404) are logged too; they are not the point here.
    page.on('console', (m) => { if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(m.text()) })
    page.on('pageerror', (e) => problems.push(e.message))

    const res = await page.goto(`${base}/login?redirect=${encodeURIComponent('/healthz?from=login')}`)
    t.equal(res?.status(), 200)
    // The inline stylesheet is allowed by its hash: the button carries its colour.
    t.equal(await page.locator('button[type=submit]').evaluate((b) => getComputedStyle(b).backgroundColor), 'rgb(36, 86, 184)')
    // Labels are wired to their inputs (what a screen reader announces).
    await page.getByLabel('Username').fill(ADMIN.username)
    await page.getByLabel('Password').fill('wrong password')
    const [failed] = await Promise.all([
      page.waitForResponse((r) => r.url() === `${base}/login` && r.request().method() === 'POST'),
      page.getByRole('button', { name: 'Sign in' }).click()
    ])
    t.equal(failed.status(), 401, 'the browser\'s own form post passes the login CSRF check')
    await page.waitForSelector('[role=alert]')
    t.match(await page.locator('[role=alert]').textContent(), /Invalid username or password/)
    t.same((await context.cookies()).filter((c) => c.name === SESSION_COOKIE), [], 'no cookie after a failed login')

    await page.getByLabel('Password').fill(ADMIN.password)
    await Promise.all([page.waitForURL(`${base}/healthz?from=login`), page.getByRole('button', { name: 'Sign in' }).click()])
    t.match(await page.textContent('body'), /"status":"ok"/)

    const cookie = (await context.cookies()).find((c) => c.name === SESSION_COOKIE)
    t.ok(cookie, 'the session cookie is set')
    t.match(cookie, { path: '/', sameSite: 'Lax', httpOnly: false, secure: false })
    t.match(cookie?.value, /^[A-Za-z0-9_-]{43}$/)
    // Readable by page scripts: what window.getServiceAuthToken() relies on.
    t.match(await page.evaluate(() => document.cookie), new RegExp(`${SESSION_COOKIE}=${cookie?.value ?? 'missing'}`))
    t.same(problems, [], 'no CSP violation or script error in the console')
  })

  t.test('a cross-site page cannot log the browser in (login CSRF)', async (t) => {
    const base = await startService(t)
    const attackerUrl = await crossSitePage(t, `<!doctype html><form id="f" method="post" action="${base}/login">
        <input name="username" value="${ADMIN.username}"><input name="password" value="${ADMIN.password}">
        <input name="redirect" value="/healthz"></form><script>document.getElementById('f').submit()</script>`)

    const context = await browser.newContext()
    t.teardown(async () => await context.close())
    const page = await context.newPage()
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url() === `${base}/login` && r.request().method() === 'POST'),
      page.goto(attackerUrl)
    ])
    t.equal(response.status(), 403)
    t.same((await context.cookies(base)).filter((c) => c.name === SESSION_COOKIE), [], 'no session cookie was set')
  })
}, [CROSS_SITE_FLAG])
