/**
 * The session cookie against a planted duplicate, in real Chromium: the server keeps using the
 * valid cookie, and the token helper never hands the planted value to the page's scripts. Over
 * https (seen through TRUST_PROXY) the cookie is `__Host-reaktor_session`, and the helper reads it.
 */
import t from 'tap'
import type { BrowserContext, Page } from 'playwright-core'
import { browserTests, submitLogin } from '../helpers/browser.js'
import { SECURE_SESSION_COOKIE, SESSION_COOKIE } from '../../src/auth/types.js'
import { ADMIN, ADMIN_ENV } from '../helpers/auth.js'
import { build } from '../helpers/app.js'
import { writeApp } from '../helpers/app-ui.js'
import type { TestContext } from '../helpers/test-context.js'

const PAGE = '<!DOCTYPE html><html><head><title>Cookie demo</title></head><body><p>app</p></body></html>'
const APP_PATH = '/app-ui/cookie-demo@1.0.0/'

browserTests((browser) => {

  /** The service with one app UI, and a browser logged in to it through the form. */
  async function loggedIn (t: TestContext, env: Record<string, string>, host: string, headers: Record<string, string> = {}): Promise<{ base: string, context: BrowserContext, page: Page }> {
    const def = await writeApp(t, 'cookie-demo', '1.0.0', { 'public/index.html': PAGE })
    const app = await build(t, { env: { ...ADMIN_ENV, ...env }, apps: [def] })
    const origin = await app.listen({ port: 0, host: '127.0.0.1' })
    const base = origin.replace('127.0.0.1', host)
    const context = await browser.newContext({ extraHTTPHeaders: headers })
    t.teardown(async () => await context.close())
    const page = await context.newPage()
    await page.goto(`${base}${APP_PATH}`)
    await submitLogin(page, ADMIN, `${base}${APP_PATH}`)
    return { base, context, page }
  }

  const helper = async (page: Page): Promise<unknown> => await page.evaluate(() => (window as any).getServiceAuthToken())

  t.test('http: a cookie planted with a longer path neither locks the user out nor reaches the page', async (t) => {
    const { base, context, page } = await loggedIn(t, {}, '127.0.0.1')
    const real = (await context.cookies()).find((c) => c.name === SESSION_COOKIE)?.value
    t.match(real, /^[A-Za-z0-9_-]{43}$/)
    t.equal(await helper(page), real, 'before anything is planted, the helper returns the session token')

    // What a man in the middle on http (or a sibling subdomain) can do: the same name, a longer path.
    await context.addCookies([{ name: SESSION_COOKIE, value: 'planted-by-attacker', domain: '127.0.0.1', path: '/app-ui/' }])
    t.match(await page.evaluate(() => document.cookie), /^reaktor_session=planted-by-attacker; reaktor_session=/, 'the page sees the planted cookie first')
    t.equal(await helper(page), null, 'the helper answers null rather than a value that may be planted')

    const res = await page.goto(`${base}${APP_PATH}`)
    t.equal(res?.status(), 200, 'the app UI is still served: the server picks the valid cookie')
    t.equal(new URL(page.url()).pathname, APP_PATH, 'no detour to the login page')
    // That answer expired the planted cookie where it sat: the page is back to one cookie.
    t.same((await context.cookies()).filter((c) => c.name === SESSION_COOKIE).map((c) => [c.path, c.value]), [['/', real]], 'only the real cookie is left')
    t.equal(await helper(page), real, 'and the helper returns it')
  })

  t.test('https through a trusted proxy: the __Host- cookie is set and read; a plain planted cookie is ignored', async (t) => {
    // localhost is a secure context to Chromium, so it keeps a Secure, __Host- cookie over http;
    // the proxy's X-Forwarded-Proto tells the service the browser speaks https.
    const { base, context, page } = await loggedIn(t, { TRUST_PROXY: 'true' }, 'localhost', { 'x-forwarded-proto': 'https' })
    const cookies = await context.cookies()
    const secure = cookies.find((c) => c.name === SECURE_SESSION_COOKIE)
    t.ok(secure, 'the browser accepted the __Host- cookie')
    t.match(secure, { path: '/', secure: true, httpOnly: false })
    t.notOk(cookies.some((c) => c.name === SESSION_COOKIE), 'and no plain one')
    t.equal(await helper(page), secure?.value, 'the helper returns the __Host- token')

    await context.addCookies([{ name: SESSION_COOKIE, value: 'planted-by-attacker', domain: 'localhost', path: '/app-ui/' }])
    const res = await page.goto(`${base}${APP_PATH}`)
    t.equal(res?.status(), 200)
    t.equal(await helper(page), secure?.value, 'the planted plain cookie does not reach the page')
  })
})
