/**
 * The home page in a real headless Chromium, with the example apps: the console is the first,
 * button-like entry and opens the console; the page runs without a policy violation.
 */
import path from 'node:path'
import t from 'tap'
import { browserSkip, launchChromium, listeningApp, submitLogin } from '../helpers/browser.js'
import { ADMIN, ADMIN_ENV } from '../helpers/auth.js'
import { ARTIFACTS_DIR, EXAMPLE_APPS_DIR } from '../helpers/paths.js'

const skip = browserSkip()
if (skip !== false) {
  t.test('browser tests', { skip }, () => {})
} else {
  t.test('the home page: Open the console first, the other UIs, the apps without one; the console link opens it', async (t) => {
    const { base } = await listeningApp(t, { env: { ...ADMIN_ENV, REAKTOR_APPS_DIR: EXAMPLE_APPS_DIR } })
    const browser = await launchChromium(t)
    const context = await browser.newContext({ viewport: { width: 900, height: 700 } })
    t.teardown(async () => await context.close())
    const tab = await context.newPage()
    const problems: string[] = []
    tab.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(m.text()) })
    tab.on('pageerror', (e) => problems.push(e.message))
    await tab.goto(`${base}/`)
    await submitLogin(tab, ADMIN, `${base}/`)

    const links = await tab.locator('main a').evaluateAll((as) => as.map((a) => a.textContent))
    t.same(links, ['Open the console', 'drain-demo', 'API documentation'], 'the console first, then the other app UI, then the API docs')
    t.same(await tab.locator('main li').allTextContents(), ['drain-demo 1.0.0', 'heartbeat 1.0.0 — 1 polling reaktor, no UI'])
    const button = tab.getByRole('link', { name: 'Open the console' })
    const look = await button.evaluate((a) => {
      const style = getComputedStyle(a)
      return { background: style.backgroundColor, display: style.display, height: a.getBoundingClientRect().height }
    })
    t.not(look.background, 'rgba(0, 0, 0, 0)', `styled as a button: a background of its own (${look.background})`)
    t.equal(look.display, 'block')
    t.ok(look.height >= 40, `a large target (${look.height} px high)`)
    await tab.screenshot({ path: path.join(ARTIFACTS_DIR, 'home-page.png'), fullPage: true })
    t.same(problems, [], 'no error, no policy violation on the home page')

    await Promise.all([tab.waitForURL(`${base}/app-ui/reaktor-console@1.0.0/`), button.click()])
    t.equal(new URL(tab.url()).pathname, '/app-ui/reaktor-console@1.0.0/', 'the link opens the console')
  })
}
