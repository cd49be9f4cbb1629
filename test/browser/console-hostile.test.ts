/**
 * The console in a real headless Chromium with service data that holds markup: reaktor ids, labels,
 * descriptions and run errors, a username and a token name. Everything shows as text (no element
 * made from it, nothing run, no policy violation), links built from ids stay inside the console,
 * crafted and malformed `#/reaktor/…` links show a message, and a new token's value is kept out of
 * the URL and the page's storage.
 */
import path from 'node:path'
import t from 'tap'
import type { Page } from 'playwright-core'
import { browserTests, listeningApp } from '../helpers/browser.js'
import { ADMIN, ADMIN_ENV, apiAs, createApiToken, loginToken } from '../helpers/auth.js'
import { EXAMPLE_APPS_DIR } from '../helpers/paths.js'
import { FAST_SCHEDULER } from '../helpers/scheduler.js'
import type { AppDefinition } from '../../src/apps/types.js'
import { deadline, waitFor } from '../helpers/timing.js'

const CONSOLE_DIR = path.join(EXAMPLE_APPS_DIR, 'reaktor-console')
const CONSOLE: AppDefinition = { name: 'reaktor-console', version: '1.0.0', dir: CONSOLE_DIR, publicDir: path.join(CONSOLE_DIR, 'public') }
const CONSOLE_PATH = '/app-ui/reaktor-console@1.0.0/'

// Each payload, were it parsed as HTML, makes an element of class `pwn` (and would try to run code).
const MARKUP_ID = '<img src=x class=pwn onerror=alert(1)>'
const MARKUP_LABEL = '<b class=pwn>bold</b>'
const MARKUP_DESCRIPTION = '<script class=pwn>alert(2)</script>'
const MARKUP_ERROR = '<img src=x class=pwn onerror=alert(3)>'
const JS_ID = 'javascript:alert(4)'
const QUOTE_LABEL = '" autofocus onfocus="alert(5)'
const MARKUP_USER = '<img src=x class=pwn>'
const MARKUP_TOKEN = '<svg class=pwn onload=alert(6)>'

const FLEET: AppDefinition = {
  name: 'hostile-fleet',
  version: '1.0.0',
  pollingReaktors: [
    { reaktorDefinitionId: MARKUP_ID, label: MARKUP_LABEL, description: MARKUP_DESCRIPTION, interval: '1h', autoStart: true, createReaktor: () => async () => { throw new Error(MARKUP_ERROR) } },
    { reaktorDefinitionId: JS_ID, label: QUOTE_LABEL, interval: '1h', createReaktor: () => async () => false }
  ]
}

browserTests((browser) => {

  /** Elements made from the payloads, and links in the view that leave the console's own routes. */
  async function injected (page: Page): Promise<{ pwn: number, links: string[] }> {
    return await page.evaluate(() => ({
      pwn: document.querySelectorAll('.pwn').length,
      links: Array.from(document.querySelectorAll('#view a[href]')).map((a) => a.getAttribute('href') ?? '').filter((href) => !href.startsWith('#/'))
    }))
  }

  t.test('markup in ids, labels, descriptions, run errors, a username and a token name is shown as text and never run', async (t) => {
    const { app, base } = await listeningApp(t, { env: ADMIN_ENV, apps: [CONSOLE, FLEET], scheduler: FAST_SCHEDULER })
    const admin = apiAs(app, await loginToken(app))
    t.equal((await admin('POST', '/api/v1/users', { username: MARKUP_USER, role: 'operator', password: 'a long enough password' })).statusCode, 201)
    await createApiToken(app, await loginToken(app), { name: MARKUP_TOKEN })
    // The failing reaktor has run once: its error is there to show.
    const failed = await waitFor(async () => {
      const { body } = await admin('GET', `/api/v1/polling/${encodeURIComponent(MARKUP_ID)}/status`)
      return typeof body.lastError === 'string' ? body : undefined
    }, { what: 'the first failed run' })
    t.match(failed.lastError, MARKUP_ERROR)

    const context = await browser.newContext()
    t.teardown(async () => await context.close())
    const page = await context.newPage()
    const dialogs: string[] = []
    const problems: string[] = []
    page.on('dialog', (d) => { dialogs.push(d.message()); void d.dismiss() })
    page.on('pageerror', (e) => problems.push(e.message))
    await page.addInitScript(() => {
      const seen: string[] = []
      Object.assign(window, { violations: seen })
      document.addEventListener('securitypolicyviolation', (e) => seen.push(`${e.violatedDirective} ${e.blockedURI}`))
    })
    await page.goto(base + CONSOLE_PATH)
    await page.waitForURL(/\/login\?redirect=/)
    await page.getByLabel('Username').fill(ADMIN.username)
    await page.getByLabel('Password').fill(ADMIN.password)
    await Promise.all([page.waitForURL(base + CONSOLE_PATH), page.getByRole('button', { name: 'Sign in' }).click()])
    const consolePage = await page.reload()
    const scriptSrc = (consolePage?.headers()['content-security-policy'] ?? '').split(';').map((d) => d.trim()).find((d) => d.startsWith('script-src ')) ?? ''
    t.match(scriptSrc, /^script-src 'self' /, 'the console is served with a script policy')
    t.notMatch(scriptSrc, /unsafe-inline|unsafe-eval/, 'which runs no inline script and no eval')

    // The list: both rows, their text literal.
    const list = page.locator('table.reaktors tbody')
    await list.getByText(MARKUP_LABEL, { exact: true }).waitFor()
    await list.getByText(QUOTE_LABEL, { exact: true }).waitFor()
    t.same(await injected(page), { pwn: 0, links: [] }, 'the list: no element from the data, every link a console route')

    // The reaktor page, reached by its link: label, description, error, all as text.
    await list.getByRole('link', { name: MARKUP_LABEL }).click()
    await page.getByRole('heading', { name: MARKUP_LABEL }).waitFor()
    await page.getByText(MARKUP_DESCRIPTION, { exact: true }).waitFor()
    await page.locator('table.runs').getByText(MARKUP_ERROR).first().waitFor()
    t.same(await injected(page), { pwn: 0, links: [] }, 'the reaktor page: no element from the data')
    await page.goto(`${base}${CONSOLE_PATH}#/reaktor/${encodeURIComponent(JS_ID)}`)
    await page.getByRole('heading', { name: QUOTE_LABEL }).waitFor()
    t.same(await injected(page), { pwn: 0, links: [] }, 'an id like a javascript: URL stays an id')

    // Crafted links: markup in the hash, and a stray % that cannot be decoded.
    await page.goto(`${base}${CONSOLE_PATH}#/reaktor/${encodeURIComponent('<img src=x class=pwn onerror=alert(7)>x')}`)
    await page.locator('.not-registered').waitFor()
    t.same(await injected(page), { pwn: 0, links: [] }, 'markup in the hash: a message, no element')
    // From the list: a hash that failed to route would leave the list in place.
    await page.goto(`${base}${CONSOLE_PATH}#/`)
    await page.locator('table.reaktors tbody tr').first().waitFor()
    await page.goto(`${base}${CONSOLE_PATH}#/reaktor/%E0%A4%A`)
    await page.locator('.not-registered').waitFor({ timeout: deadline(10_000) })
    t.pass('a malformed hash: the not-registered message, not a blank page')

    // The users and the tokens views.
    await page.goto(`${base}${CONSOLE_PATH}#/users`)
    await page.getByText(MARKUP_USER, { exact: true }).first().waitFor()
    t.same(await injected(page), { pwn: 0, links: [] }, 'the users view: no element from a username')
    await page.goto(`${base}${CONSOLE_PATH}#/tokens`)
    await page.getByText(MARKUP_TOKEN, { exact: true }).first().waitFor()
    t.same(await injected(page), { pwn: 0, links: [] }, 'the tokens view: no element from a token name')

    // A token created here: shown once, never in the URL or the page's storage.
    await page.getByLabel('Name', { exact: true }).fill('from the console')
    await page.getByRole('button', { name: 'Create token' }).click()
    const secret = (await page.locator('[data-secret="token"]').textContent()) ?? ''
    t.match(secret, /^reaktor_pat_/)
    const kept = await page.evaluate(() => JSON.stringify([window.location.href, { ...window.localStorage }, { ...window.sessionStorage }, document.cookie]))
    t.notOk(kept.includes(secret), 'the token is not in the URL, localStorage, sessionStorage or a cookie')

    t.same(dialogs, [], 'no alert ran')
    t.same(problems, [], 'no page errors')
    t.same(await page.evaluate(() => (window as unknown as { violations: string[] }).violations), [], 'no policy violation')
  })
})
