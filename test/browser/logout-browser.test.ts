/**
 * Signing out in a real headless Chromium: the home page's button ends the session for every tab
 * of the browser at once (an open app UI's token helper answers null without a reload, the token
 * is refused by the API), and a cross-site page cannot sign the browser out.
 */
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import type { BrowserContext, Page } from 'playwright-core'
import { browserTests, CROSS_SITE_FLAG, crossSitePage, listeningApp, submitLogin } from '../helpers/browser.js'
import { SESSION_COOKIE } from '../../src/auth/types.js'
import { ADMIN, ADMIN_ENV } from '../helpers/auth.js'
import type { TestContext } from '../helpers/test-context.js'
import { margin, waitFor } from '../helpers/timing.js'
import { ARTIFACTS_DIR, EXAMPLE_APPS_DIR } from '../helpers/paths.js'

const APP_UI = '/app-ui/drain-demo@1.0.0/'

browserTests((browser) => {

  async function startService (t: TestContext) {
    return await listeningApp(t, { env: { ...ADMIN_ENV, REAKTOR_APPS_DIR: EXAMPLE_APPS_DIR } })
  }

  async function newContext (t: TestContext): Promise<BrowserContext> {
    const context = await browser.newContext()
    t.teardown(async () => await context.close())
    return context
  }

  /** Signs in through the login form the app UI sends the browser to; back on the app UI. */
  async function signInThroughAppUi (tab: Page, base: string): Promise<void> {
    await tab.goto(`${base}${APP_UI}`)
    await submitLogin(tab, ADMIN, `${base}${APP_UI}`)
  }

  /** The answer of the API to a token, as a script would call it. */
  async function apiStatus (base: string, token: string): Promise<number> {
    return (await fetch(`${base}/api/v1/polling`, { headers: { 'x-service-token': token } })).status
  }

  t.test('signing out on the home page ends the session in every tab, without a reload', async (t) => {
    const { app, base } = await startService(t)
    const context = await newContext(t)
    const appTab = await context.newPage()
    // The example UI refreshes every second and, once it finds no token, goes to the login page on
    // its own. Its timers wait for the test's word, so that the tab is still the same page when the
    // test asks its helper: installed fake time still flows with real time (the sign-in needs it),
    // so it is paused once the UI is up, at a moment far enough ahead that it is not yet past when
    // the pause arrives on a busy machine (10 ms was not always); a refresh fired on the way finds
    // the token still live.
    await appTab.clock.install()
    await signInThroughAppUi(appTab, base)
    await appTab.clock.pauseAt(await appTab.evaluate(() => Date.now()) + margin('seconds'))
    const token = await appTab.evaluate(() => (window as any).getServiceAuthToken() as string | null)
    t.type(token, 'string', 'the app UI\'s helper has the session token')
    t.equal(await apiStatus(base, token!), 200, 'which the API accepts')

    const homeTab = await context.newPage()
    const problems: string[] = []
    homeTab.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()) })
    homeTab.on('pageerror', (e) => problems.push(e.message))
    await homeTab.goto(`${base}/`)
    const signOut = homeTab.getByRole('button', { name: 'Sign out' })
    t.ok(await signOut.isVisible(), 'the home page shows the sign-out button')
    // Styled by the page's own stylesheet, which its policy allows by hash.
    t.equal(await signOut.evaluate((b) => getComputedStyle(b).color), 'rgb(36, 86, 184)')
    fs.mkdirSync(ARTIFACTS_DIR, { recursive: true })
    await homeTab.screenshot({ path: path.join(ARTIFACTS_DIR, 'home.png'), fullPage: true })

    const [logout] = await Promise.all([
      homeTab.waitForResponse((r) => r.url() === `${base}/logout` && r.request().method() === 'POST'),
      homeTab.waitForURL(`${base}/login`),
      signOut.click()
    ])
    t.equal(logout.status(), 303, 'the browser\'s own form post passes the cross-site check')
    t.equal(new URL(homeTab.url()).pathname, '/login', 'the browser landed on the login page')
    t.ok(await homeTab.getByRole('button', { name: 'Sign in' }).isVisible())

    // The app UI tab, not reloaded: the helper reads the cookie each time, and it is gone.
    t.equal(appTab.url(), `${base}${APP_UI}`, 'the app UI tab is still the page it was')
    t.equal(await appTab.evaluate(() => (window as any).getServiceAuthToken()), null, 'the helper answers null at once')
    t.equal(await apiStatus(base, token!), 401, 'the old token is refused by the API')
    t.same((await context.cookies(base)).filter((c) => c.name === SESSION_COOKIE), [], 'the browser holds no session cookie')
    t.same(problems, [], 'no policy violation or script error on the home page')

    // Let the app UI's next refresh come: it finds no token and goes to the login page itself (its
    // two calls each start that navigation, the second aborting the first: the URL is what counts).
    await appTab.clock.runFor(1000)
    await waitFor(() => new URL(appTab.url()).pathname === '/login', { what: 'the app UI to go to the login page' })
    t.equal(new URL(appTab.url()).searchParams.get('redirect'), APP_UI, 'and would come back after a new sign-in')

    const audit = await app.db.selectFrom('audit').select(['actor', 'targets']).where('action', '=', 'auth.logout').execute()
    t.same(audit, [{ actor: ADMIN.username, targets: [ADMIN.username] }])
  })

  t.test('a cross-site page cannot sign the browser out', async (t) => {
    const { base } = await startService(t)
    const attackerUrl = await crossSitePage(t, `<!doctype html><form id="f" method="post" action="${base}/logout"></form>
        <script>document.getElementById('f').submit()</script>`)

    const context = await newContext(t)
    const tab = await context.newPage()
    await signInThroughAppUi(tab, base)
    const token = await tab.evaluate(() => (window as any).getServiceAuthToken() as string | null)
    t.type(token, 'string')

    const attacked = await context.newPage()
    const [response] = await Promise.all([
      attacked.waitForResponse((r) => r.url() === `${base}/logout` && r.request().method() === 'POST'),
      attacked.goto(attackerUrl)
    ])
    t.equal(response.status(), 403)
    t.equal(await apiStatus(base, token!), 200, 'the session is still live')
    t.equal((await context.cookies(base)).find((c) => c.name === SESSION_COOKIE)?.value, token, 'the browser keeps its cookie')
    t.equal(await tab.evaluate(() => (window as any).getServiceAuthToken()), token, 'the app UI still has its token')
  })
}, [CROSS_SITE_FLAG])
