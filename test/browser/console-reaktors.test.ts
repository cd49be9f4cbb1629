/**
 * The console's reaktors views in a real headless Chromium: the list (filter, sort, start, bulk
 * start, a failing reaktor marked, rows updated in place), one reaktor (run now adds a history row,
 * one chart bar per run, its metrics), phone width and dark mode without a page-wide horizontal
 * scrollbar, the way back to the login page when the session ends, and no request to another origin.
 */
import { randomUUID } from 'node:crypto'
import fs from 'node:fs/promises'
import path from 'node:path'
import t, { type Test } from 'tap'
import type { BrowserContext, Page } from 'playwright-core'
import type { FastifyInstance } from 'fastify'
import { browserTests, listeningApp, submitLogin } from '../helpers/browser.js'
import { ADMIN, ADMIN_ENV } from '../helpers/auth.js'
import { ARTIFACTS_DIR, EXAMPLE_APPS_DIR } from '../helpers/paths.js'
import { FAST_SCHEDULER } from '../helpers/scheduler.js'
import { SESSION_COOKIE } from '../../src/auth/types.js'
import type { AppDefinition } from '../../src/apps/types.js'
import type { TestContext } from '../helpers/test-context.js'
import { deadline, waitFor } from '../helpers/timing.js'

const CONSOLE_DIR = path.join(EXAMPLE_APPS_DIR, 'reaktor-console')
const CONSOLE: AppDefinition = { name: 'reaktor-console', version: '1.0.0', dir: CONSOLE_DIR, publicDir: path.join(CONSOLE_DIR, 'public') }
const CONSOLE_PATH = '/app-ui/reaktor-console@1.0.0/'

/** Four reaktors: two started at boot (one of them always failing), two stopped. */
const FLEET: AppDefinition = {
  name: 'console-fleet',
  version: '1.0.0',
  pollingReaktors: [
    { reaktorDefinitionId: 'alpha-ok', label: 'Alpha', description: 'Checks the inbox for new work', interval: '1h', autoStart: true, createReaktor: () => async () => false },
    { reaktorDefinitionId: 'beta-fail', label: 'Beta', interval: '1h', autoStart: true, createReaktor: () => async () => { throw new Error('upstream down') } },
    { reaktorDefinitionId: 'delta-idle', label: 'Delta', interval: '30m', createReaktor: () => async () => false },
    { reaktorDefinitionId: 'gamma-idle', label: 'Gamma', interval: '1h', createReaktor: () => async () => false }
  ]
}

/** The fleet and a reaktor whose id and label are as long as an operator may make them. */
const LONG_ID = `very-long-${'reaktor-id-'.repeat(10)}end`.slice(0, 120)
const LONG_FLEET: AppDefinition = {
  ...FLEET,
  pollingReaktors: [...FLEET.pollingReaktors ?? [], {
    reaktorDefinitionId: LONG_ID, label: `Synchronises ${'the customer ledger with the warehouse '.repeat(3)}`.slice(0, 120), interval: '1h', autoStart: true, createReaktor: () => async () => false
  }]
}

browserTests((browser) => {

  interface Console { app: FastifyInstance, base: string, context: BrowserContext, page: Page, foreign: string[], problems: string[] }

  /** The service with the console and the fleet, and a browser signed in on the console's list. */
  async function openConsole (t: TestContext, options: { viewport?: { width: number, height: number }, colorScheme?: 'light' | 'dark', fleet?: AppDefinition, clock?: boolean } = {}): Promise<Console> {
    await fs.mkdir(ARTIFACTS_DIR, { recursive: true })
    const { app, base } = await listeningApp(t, { env: ADMIN_ENV, apps: [CONSOLE, options.fleet ?? FLEET], scheduler: FAST_SCHEDULER })
    const context = await browser.newContext({ viewport: options.viewport ?? { width: 1280, height: 800 }, colorScheme: options.colorScheme ?? 'light' })
    t.teardown(async () => await context.close())
    const page = await context.newPage()
    const foreign: string[] = []
    const problems: string[] = []
    page.on('request', (r) => { if (new URL(r.url()).origin !== base) foreign.push(r.url()) })
    page.on('console', (m) => { if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(m.text()) })
    page.on('pageerror', (e) => problems.push(e.message))
    if (options.clock === true) await page.clock.install()
    await page.goto(base + CONSOLE_PATH)
    await page.waitForURL(/\/login\?redirect=/)
    await submitLogin(page, ADMIN, base + CONSOLE_PATH)
    await page.locator('table.reaktors tbody tr').nth(3).waitFor()
    return { app, base, context, page, foreign, problems }
  }

  const row = (page: Page, id: string): ReturnType<Page['locator']> => page.locator(`tr[data-id="${id}"]`)
  const ids = async (page: Page): Promise<string[]> => await page.locator('table.reaktors tbody tr').evaluateAll((trs) => trs.map((tr) => (tr as HTMLElement).dataset.id ?? ''))

  /** Waits until the list shows exactly `expected`, in this order. */
  async function expectIds (t: Test, page: Page, expected: string[], what: string): Promise<void> {
    await page.waitForFunction((want) => JSON.stringify(Array.from(document.querySelectorAll('table.reaktors tbody tr')).map((tr) => (tr as HTMLElement).dataset.id)) === want, JSON.stringify(expected), { timeout: deadline(10_000) })
    t.same(await ids(page), expected, what)
  }

  async function status (app: FastifyInstance, id: string, token: string): Promise<Record<string, any>> {
    return (await app.inject({ url: `/api/v1/polling/${id}/status`, headers: { 'x-service-token': token } })).json()
  }

  async function sessionOf (context: BrowserContext): Promise<string> {
    const cookie = (await context.cookies()).find((c) => c.name === SESSION_COOKIE)
    if (cookie === undefined) throw new Error('no session cookie')
    return cookie.value
  }

  /** Horizontal overflow of the page itself (a table scrolling inside its box does not count). */
  const pageOverflow = async (page: Page): Promise<number> => await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)

  t.test('the list: failing marked, filter, sort, start, bulk start, rows kept in place', async (t) => {
    const { app, page, context, foreign, problems } = await openConsole(t)
    const token = await sessionOf(context)
    await expectIds(t, page, ['alpha-ok', 'beta-fail', 'delta-idle', 'gamma-idle'], 'every reaktor, by id')
    t.match(await row(page, 'alpha-ok').textContent(), /Alpha.*alpha-ok.*console-fleet.*running.*1h/)

    // The failing one stands out with a marker and a badge, not by colour alone.
    await page.waitForSelector('tr[data-id="beta-fail"].failing')
    t.match(await row(page, 'beta-fail').locator('td[data-label="State"]').textContent(), /failing/)
    t.match(await row(page, 'beta-fail').locator('td[data-label="Last run"]').textContent(), /failed/)
    t.equal(await page.locator('tr.failing').count(), 1, 'only the failing reaktor is marked')
    t.match(await row(page, 'beta-fail').locator('.marker').evaluate((m) => getComputedStyle(m, '::before').content), /⚠/)
    await page.screenshot({ path: path.join(ARTIFACTS_DIR, 'console-reaktors-light.png') })

    // Filters: text, then each state with its count.
    await page.getByLabel('Filter').fill('gam')
    await expectIds(t, page, ['gamma-idle'], 'text filter')
    await page.getByLabel('Filter').fill('')
    await page.locator('.states button[data-state="stopped"]').click()
    await expectIds(t, page, ['delta-idle', 'gamma-idle'], 'stopped only')
    t.match(await page.locator('.states').textContent(), /All 4.*Running 2.*Stopped 2.*Failing 1/)
    await page.locator('.states button[data-state="failing"]').click()
    await expectIds(t, page, ['beta-fail'], 'failing only')
    t.equal(await page.locator('.states button[data-state="failing"]').getAttribute('aria-pressed'), 'true')
    await page.locator('.states button[data-state="all"]').click()
    await expectIds(t, page, ['alpha-ok', 'beta-fail', 'delta-idle', 'gamma-idle'], 'all again')
    t.match(await page.locator('.pager .range').textContent(), /1–4 of 4/)

    // Sort by a header's button, keyboard alone: focus it, Enter; again for the other order.
    const intervalHeader = page.locator('th[data-key="interval"]')
    await intervalHeader.locator('button').focus()
    await page.keyboard.press('Enter')
    await page.waitForFunction(() => document.querySelector('th[data-key="interval"]')?.getAttribute('aria-sort') === 'ascending')
    t.equal((await ids(page))[0], 'delta-idle', 'the shortest interval first')
    await page.keyboard.press('Enter')
    await page.waitForFunction(() => document.querySelector('th[data-key="interval"]')?.getAttribute('aria-sort') === 'descending')
    t.equal((await ids(page)).at(-1), 'delta-idle', 'the shortest interval last')
    await page.locator('button[data-sort="label"]').click()
    await expectIds(t, page, ['alpha-ok', 'beta-fail', 'delta-idle', 'gamma-idle'], 'by label')
    t.equal(await page.locator('th[data-key="interval"]').getAttribute('aria-sort'), null, 'one sorted column')

    // Start one from its row: its state changes in place, and in the service.
    await row(page, 'gamma-idle').getByRole('button', { name: 'Start Gamma' }).click()
    await page.waitForFunction(() => document.querySelector('tr[data-id="gamma-idle"] td[data-label="State"]')?.textContent?.startsWith('running'))
    t.equal((await status(app, 'gamma-idle', token)).state, 'running')
    t.match(await page.locator('#toast').textContent(), /gamma-idle.*started/)

    // A focused button and a ticked box survive the refreshes (rows are updated, not rebuilt).
    await row(page, 'delta-idle').locator('td.select input').check()
    const runNow = row(page, 'alpha-ok').getByRole('button', { name: 'Run Alpha now' })
    await runNow.focus()
    const refreshes = async (): Promise<number> => await page.evaluate(() => performance.getEntriesByType('resource').filter((e) => e.name.includes('/api/v1/polling?')).length)
    const before = await refreshes()
    await page.waitForFunction((n) => performance.getEntriesByType('resource').filter((e) => e.name.includes('/api/v1/polling?')).length >= n + 2, before, { timeout: deadline(10_000) })
    t.equal(await runNow.evaluate((b) => b === document.activeElement), true, 'the focus stayed on the button')
    t.equal(await row(page, 'delta-idle').locator('td.select input').isChecked(), true, 'the selection stayed')

    // Bulk start of the selection (delta stopped, beta already running).
    await row(page, 'beta-fail').locator('td.select input').check()
    t.match(await page.locator('.bulk').textContent(), /2 selected/)
    await page.getByRole('button', { name: 'Start selected' }).click()
    await page.waitForFunction(() => document.querySelector('tr[data-id="delta-idle"] td[data-label="State"]')?.textContent?.startsWith('running'))
    t.match(await page.locator('#toast').textContent(), /Started 1, unchanged 1/)
    t.equal((await status(app, 'delta-idle', token)).state, 'running')
    t.equal(await row(page, 'delta-idle').locator('td.select input').isChecked(), false, 'the selection is cleared once acted on')

    t.equal(await pageOverflow(page), 0, 'no horizontal scrollbar on the page')
    const tableOverflow = await page.locator('.table-wrap.reaktors').evaluate((wrap) => wrap.scrollWidth - wrap.clientWidth)
    t.equal(tableOverflow, 0, `at 1280 px the whole table shows: no scrolling sideways to reach the row's buttons (${tableOverflow} px more)`)
    t.same(foreign, [], 'no request to another origin')
    t.same(problems, [], 'no CSP violation or script error')
  })

  t.test('one reaktor: status, run now adds a history row, one chart bar per run, metrics', async (t) => {
    const { app, page, foreign, problems } = await openConsole(t)
    await page.locator('tr[data-id="alpha-ok"] a').click()
    await page.waitForURL(/#\/reaktor\/alpha-ok$/)
    await page.locator('table.runs tbody tr[data-run]').first().waitFor()
    t.match(await page.locator('h1').textContent(), 'Alpha')
    t.match(await page.locator('dd[data-field="reaktorDefinitionId"]').textContent(), 'alpha-ok')
    t.match(await page.locator('dd[data-field="app"]').textContent(), 'console-fleet')
    t.match(await page.locator('.reaktor .description').textContent(), 'Checks the inbox for new work')
    t.match(await page.locator('dd[data-field="lastOutcome"]').textContent(), /no work/)
    const runsBefore = await page.locator('table.runs tbody tr[data-run]').count()

    await page.getByRole('button', { name: 'Run Alpha now' }).press('Enter')
    await page.waitForFunction((n) => document.querySelectorAll('table.runs tbody tr[data-run]').length === n + 1, runsBefore, { timeout: deadline(10_000) })
    t.pass('run now shows as a new row of the history')
    const runs = await page.locator('table.runs tbody tr[data-run]').count()
    t.equal(await page.locator('svg.durations[role="img"] rect.bar').count(), runs, 'one chart bar per run')
    t.match(await page.locator('figure.chart figcaption').textContent(), new RegExp(`${runs} most recent runs: ${runs} no work`))
    t.ok(await page.locator('svg.durations').getAttribute('aria-labelledby'), 'the chart is labelled by its summary')

    await page.waitForSelector('table.metrics tbody tr')
    const metrics = await page.locator('table.metrics').textContent()
    t.match(metrics, /reaktor_polling_running\{node="test-node"\}1/)
    t.match(metrics, /reaktor_polling_consecutive_failures\{node="test-node"\}0/)
    t.notMatch(metrics, /_bucket/)
    await page.screenshot({ path: path.join(ARTIFACTS_DIR, 'console-reaktor-detail.png'), fullPage: true })

    // A longer history: the first 20, then "Load more" for the rest; the chart has a bar for each.
    const hourAgo = Date.now() - 3_600_000
    await app.db.insertInto('polling_runs').values(Array.from({ length: 30 }, (_, i) => ({
      run_id: randomUUID(), reaktor_id: 'gamma-idle', node: 'node-b', started_at: new Date(hourAgo + i * 60_000), duration_ms: 10 * (i + 1), outcome: i % 3 === 0 ? 'failed' : 'no_work', error: i % 3 === 0 ? 'boom' : null
    }))).execute()
    await page.goto(page.url().replace(/#.*$/, '#/reaktor/gamma-idle'))
    await page.waitForFunction(() => document.querySelectorAll('table.runs tbody tr[data-run]').length === 20)
    t.equal(await page.locator('svg.durations rect.bar').count(), 20)
    await page.getByRole('button', { name: 'Load more' }).press('Enter')
    await page.waitForFunction(() => document.querySelectorAll('table.runs tbody tr[data-run]').length === 30)
    t.equal(await page.getByRole('button', { name: 'Load more' }).isHidden(), true, 'no more to load')
    t.equal(await page.locator('svg.durations rect.bar').count(), 30, 'a bar per run')
    t.equal(await page.locator('svg.durations rect.bar.failed').count(), 10, 'failed runs coloured as such')
    t.match(await page.locator('figure.chart figcaption').textContent(), /30 most recent runs: 10 failed, 20 no work; median 160 ms, longest 300 ms/)
    t.match(await page.evaluate(() => document.activeElement?.closest('tr')?.textContent), /failed.*boom/, 'the focus moves to the first row loaded')

    // A failing one shows its error; an unknown id says so and links back.
    await page.goto(page.url().replace(/#.*$/, '#/reaktor/beta-fail'))
    await page.waitForSelector('table.runs td.error')
    t.match(await page.locator('table.runs td.error').first().textContent(), /upstream down/)
    t.match(await page.locator('.badges').textContent(), /failing/)
    await page.goto(page.url().replace(/#.*$/, '#/reaktor/no-such-reaktor'))
    await page.waitForSelector('.not-registered')
    t.match(await page.locator('.not-registered').textContent(), /"no-such-reaktor" is not registered/)
    await page.getByRole('link', { name: 'Back to the reaktors' }).click()
    await page.locator('table.reaktors tbody tr').nth(3).waitFor()
    t.same(foreign, [], 'no request to another origin')
    t.same(problems, [], 'no CSP violation or script error')
  })

  t.test('pages of 50 from the server; no refresh while the tab is hidden', async (t) => {
    const many: AppDefinition = {
      name: 'console-many',
      version: '1.0.0',
      pollingReaktors: Array.from({ length: 120 }, (_, i) => ({ reaktorDefinitionId: `many-${String(i).padStart(3, '0')}`, interval: '1h', createReaktor: () => async () => false }))
    }
    const { page, base } = await openConsole(t, { fleet: many, clock: true })
    const lists: string[] = []
    page.on('request', (r) => { if (r.url().includes('/api/v1/polling?')) lists.push(r.url()) })
    await page.waitForFunction(() => document.querySelector('.pager .range')?.textContent === '1–50 of 120')
    t.equal(await page.locator('table.reaktors tbody tr').count(), 50)
    t.equal((await ids(page))[0], 'many-000')
    t.match(await page.locator('.states').textContent(), /All 120.*Running 0.*Stopped 120.*Failing 0/)
    await page.getByRole('button', { name: 'Next →' }).click()
    await page.waitForFunction(() => document.querySelector('.pager .range')?.textContent === '51–100 of 120')
    t.equal((await ids(page))[0], 'many-050')
    await page.getByRole('button', { name: 'Next →' }).click()
    await page.waitForFunction(() => document.querySelector('.pager .range')?.textContent === '101–120 of 120')
    t.equal(await page.locator('table.reaktors tbody tr').count(), 20)
    t.equal(await page.getByRole('button', { name: 'Next →' }).isDisabled(), true, 'no page after the last')
    t.match(lists.at(-1), /limit=50&offset=100/)

    // Hidden: the page's timers run for 10 s of its time without one list request.
    const visibility = async (state: string): Promise<void> => await page.evaluate(`Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => '${state}' }); document.dispatchEvent(new Event('visibilitychange'))`)
    await visibility('hidden')
    const hiddenAt = lists.length
    for (let second = 0; second < 10; second++) {
      await page.clock.runFor(1000)
      // A request of the page's own after the timers ran: it is seen after any refresh they sent, so
      // once it is answered such a refresh is counted (and has had time for its answer and its
      // next timer). Without it the check below could run before a refresh's request event.
      const barrier = `${base}/healthz?hidden=${second}`
      await Promise.all([page.waitForResponse(barrier), page.evaluate(async (url) => { await fetch(url) }, barrier)])
    }
    t.equal(lists.length, hiddenAt, 'no refresh while hidden')
    // Visible again: a refresh at once, then one a second at most, counted on the page's clock.
    await visibility('visible')
    await waitFor(() => lists.length > hiddenAt, { what: 'a refresh once visible' })
    const shownAt = lists.length
    let pageMs = 0
    await waitFor(async () => {
      await page.clock.runFor(250)
      pageMs += 250
      return lists.length >= shownAt + 5
    }, { what: 'five more refreshes', timeoutMs: deadline(30_000) })
    t.ok(lists.length - shownAt <= pageMs / 1000 + 1, `at most one refresh a second (${lists.length - shownAt} in ${pageMs} ms of page time)`)
  })

  /** The row of the longest id and label is cut to a few lines (the whole label on hover), not a column of text. */
  async function longRowIsShort (t: Test, page: Page, layout: string): Promise<void> {
    const cell = row(page, LONG_ID).locator('td[data-label="Label"]')
    const { height, line } = await cell.evaluate((td) => ({
      height: ['.name', '.id'].reduce((sum, part) => sum + (td.querySelector(part)?.getBoundingClientRect().height ?? Infinity), 0),
      line: parseFloat(getComputedStyle(td).lineHeight)
    }))
    // Three lines of label and two of id (in a smaller font), with half a line to spare.
    t.ok(height <= 5.5 * line, `${layout}: the label and id take ${height} px, ${(height / line).toFixed(1)} lines`)
    const link = row(page, LONG_ID).locator('a')
    t.equal(await link.getAttribute('title'), LONG_FLEET.pollingReaktors?.at(-1)?.label, `${layout}: the whole label on hover`)
  }

  t.test('phone width and dark mode: no page-wide horizontal scrollbar', async (t) => {
    const { app, page } = await openConsole(t, { viewport: { width: 390, height: 844 }, colorScheme: 'dark', fleet: LONG_FLEET })
    await page.waitForSelector('tr[data-id="beta-fail"].failing')
    t.equal(await pageOverflow(page), 0, 'the list fits 390 px')
    await longRowIsShort(t, page, 'phone')
    t.equal(await page.locator('tr[data-id="alpha-ok"] td[data-label="Owner"]').isVisible(), false, 'less important columns are hidden')
    t.equal(await page.locator('tr[data-id="alpha-ok"] td[data-label="Next run"]').isVisible(), true)
    t.equal(await page.evaluate(() => getComputedStyle(document.body).backgroundColor), 'rgb(18, 21, 28)', 'the dark colours')
    await page.screenshot({ path: path.join(ARTIFACTS_DIR, 'console-reaktors-phone-dark.png'), fullPage: true })
    await page.locator('tr[data-id="beta-fail"] a').click()
    await page.locator('table.runs tbody tr[data-run]').first().waitFor()
    t.equal(await pageOverflow(page), 0, 'the reaktor page fits 390 px')
    const runsWrap = page.locator('.table-wrap:has(table.runs)')
    t.equal(await runsWrap.evaluate((wrap) => wrap.scrollWidth - wrap.clientWidth), 0, 'the run history fits too, no scrolling sideways in its box')
    const error = await page.locator('table.runs td.error').first().boundingBox()
    t.ok(error !== null && error.x + error.width <= 390, `a run's error is in view (${JSON.stringify(error)})`)
    await page.screenshot({ path: path.join(ARTIFACTS_DIR, 'console-reaktor-phone-dark.png'), fullPage: true })

    // One run of 0 ms: the words agree with each other (the chart's scale is 1 ms at the least).
    await app.db.insertInto('polling_runs').values({ run_id: randomUUID(), reaktor_id: 'delta-idle', node: 'node-b', started_at: new Date(), duration_ms: 0, outcome: 'no_work', error: null }).execute()
    await page.goto(page.url().replace(/#.*$/, '#/reaktor/delta-idle'))
    await page.locator('table.runs tbody tr[data-run]').first().waitFor()
    t.equal(await page.locator('figure.chart figcaption').textContent(), '1 run: 1 no work; median 0 ms, longest 0 ms.')
    t.equal(await page.locator('figure.chart .axis-labels').textContent(), '← oldestbar height: duration, tallest 0 msnewest →')

    await page.setViewportSize({ width: 1280, height: 800 })
    await page.goto(page.url().replace(/#.*$/, '#/'))
    await page.waitForSelector('tr[data-id="beta-fail"].failing')
    t.equal(await pageOverflow(page), 0, 'the wide list in dark mode')
    await longRowIsShort(t, page, 'wide')
    // With the keyboard, so that the focus ring shows: it must not be cut off with the label.
    await row(page, LONG_ID).locator('td.select input').focus()
    await page.keyboard.press('Tab')
    t.equal(await row(page, LONG_ID).locator('a').evaluate((a) => a === document.activeElement), true, 'the long label\'s link has the focus')
    await page.screenshot({ path: path.join(ARTIFACTS_DIR, 'console-reaktors-dark.png'), fullPage: true })
  })

  t.test('a session ended elsewhere leads to the login page, back to the same view', async (t) => {
    const { app, base, page, context } = await openConsole(t)
    await page.locator('tr[data-id="gamma-idle"] a').click()
    await page.waitForSelector('dd[data-field="state"]')
    const res = await app.inject({ method: 'POST', url: '/api/v1/auth/logout', headers: { 'x-service-token': await sessionOf(context) } })
    t.equal(res.statusCode, 200)
    await page.waitForURL(/\/login\?redirect=/, { timeout: deadline(10_000) })
    t.equal(new URL(page.url()).searchParams.get('redirect'), `${CONSOLE_PATH}#/reaktor/gamma-idle`)
    t.equal(new URL(page.url()).origin, base)
  })
})
