/**
 * The docs page in a real headless Chromium: it renders every operation under its own strict CSP
 * without a single violation, loads nothing from any other origin, and a person can authorize
 * with a token and try an operation out ("Try it out" → Execute) and read its 200.
 */
import { mkdir } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { browserTests, listeningApp } from '../helpers/browser.js'
import { ADMIN_ENV, loginToken } from '../helpers/auth.js'
import { probe } from '../helpers/scheduler.js'

const ARTIFACTS = path.join(import.meta.dirname, '..', 'artifacts')

declare global {
  interface Window { cspViolations: string[] }
}

browserTests((browser) => {

  t.test('the docs page renders under its CSP, loads only from the service, and tries an operation out with a token', async (t) => {
    const { app, base } = await listeningApp(t, { env: ADMIN_ENV, apps: [{ name: 'docs-app', version: '1.0.0', pollingReaktors: [probe('docs-reaktor', () => false, { interval: '1h' }).registration] }] })
    const token = await loginToken(app)

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
    t.teardown(async () => await context.close())
    const page = await context.newPage()
    // Recorded by the page itself, from before its first script runs.
    await page.addInitScript(() => {
      window.cspViolations = []
      document.addEventListener('securitypolicyviolation', (e) => { window.cspViolations.push(`${e.effectiveDirective} ${e.blockedURI}`) })
    })
    const problems: string[] = []
    page.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()) })
    page.on('pageerror', (e) => problems.push(e.message))
    const requests: string[] = []
    page.on('request', (r) => requests.push(r.url()))

    const res = await page.goto(`${base}/docs`)
    t.equal(res?.status(), 200)
    const listOp = page.locator('#operations-polling-listPollingReaktors')
    await listOp.waitFor()
    const rendered = await page.locator('.opblock').count()
    const documented = Object.values((await app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json().paths as Record<string, object>)
      .reduce((n, methods) => n + Object.keys(methods).length, 0)
    t.equal(rendered, documented, `every operation of the document is rendered (${rendered})`)

    // Authorize as a person would: the padlock button, the token, Authorize ("Apply credentials"), Close.
    await page.locator('.auth-wrapper .authorize').click()
    const dialog = page.locator('.modal-ux')
    await dialog.getByLabel('Value').fill(token)
    await dialog.getByRole('button', { name: 'Apply credentials' }).click()
    await dialog.getByRole('button', { name: 'Close' }).click()

    await listOp.locator('.opblock-summary').first().click()
    await listOp.getByRole('button', { name: 'Try it out' }).click()
    const [answer] = await Promise.all([
      page.waitForResponse((r) => r.url() === `${base}/api/v1/polling`),
      listOp.getByRole('button', { name: 'Execute' }).click()
    ])
    t.equal(answer.status(), 200, 'the call succeeded')
    t.equal(await answer.request().headerValue('x-service-token'), token, 'with the token typed in')
    const live = listOp.locator('.live-responses-table tbody .response-col_status')
    await live.waitFor()
    t.equal((await live.textContent())?.trim(), '200', 'the page shows the 200')
    t.match(await listOp.locator('.live-responses-table tbody .response-col_description').textContent(), /docs-reaktor/, 'and the answer\'s body')

    await mkdir(ARTIFACTS, { recursive: true })
    await listOp.scrollIntoViewIfNeeded()
    await page.screenshot({ path: path.join(ARTIFACTS, 'docs.png'), fullPage: true })

    t.same(await page.evaluate(() => window.cspViolations), [], 'no CSP violation')
    t.same(problems, [], 'no error in the console')
    t.same(requests.filter((url) => new URL(url).origin !== base && !url.startsWith('data:')), [], 'nothing requested from another origin')
    t.ok(requests.some((url) => url.endsWith('/swagger-ui-bundle.js')), 'the renderer came from this service')

    // The listener hears a violation when there is one: an inline script is refused.
    const ran = await page.evaluate(async () => {
      const script = document.createElement('script')
      script.textContent = 'window.inlineRan = true'
      document.head.append(script)
      await new Promise((resolve) => setTimeout(resolve, 0))
      return (window as unknown as { inlineRan?: boolean }).inlineRan === true
    })
    t.equal(ran, false, 'an inline script does not run')
    await page.waitForFunction(() => window.cspViolations.length > 0)
    t.match(await page.evaluate(() => window.cspViolations), [/^script-src-elem inline$/], 'and is reported as a violation')
  })
})
