/**
 * How the console's reaktors list copes with 10,000 reaktors: time from navigation to the first
 * painted page of the table, and what each once-a-second refresh costs (the list request, and
 * the rest of the cycle: parsing and updating the rows). It prints figures and asserts no speed.
 *
 *   npm run test:only -- bench/console-list.ts
 */
import path from 'node:path'
import t from 'tap'
import { launchChromium, listeningApp } from '../test/helpers/browser.js'
import { ADMIN, ADMIN_ENV } from '../test/helpers/auth.js'
import { EXAMPLE_APPS_DIR } from '../test/helpers/paths.js'
import type { AppDefinition } from '../src/apps/types.js'

const REAKTORS = Number(process.env.CONSOLE_BENCH_REAKTORS ?? 10_000)
const CONSOLE_DIR = path.join(EXAMPLE_APPS_DIR, 'reaktor-console')
const CONSOLE_PATH = '/app-ui/reaktor-console@1.0.0/'

const fleet: AppDefinition = {
  name: 'bench-fleet',
  version: '1.0.0',
  // Running, so every refresh carries changed run times; every tenth one fails.
  pollingReaktors: Array.from({ length: REAKTORS }, (_, i) => ({
    reaktorDefinitionId: `bench-${String(i).padStart(5, '0')}`,
    label: `Bench ${i}`,
    interval: '30s',
    autoStart: true,
    createReaktor: () => async () => { if (i % 10 === 0) throw new Error('bench failure'); return false }
  }))
}

const stats = (xs: number[]): string => {
  const s = [...xs].sort((a, b) => a - b)
  return `n=${s.length} min ${s[0].toFixed(0)} median ${s[Math.floor(s.length / 2)].toFixed(0)} max ${s[s.length - 1].toFixed(0)} ms`
}

t.test(`the reaktors list with ${REAKTORS} reaktors`, async (t) => {
  const { base } = await listeningApp(t, {
    env: ADMIN_ENV,
    apps: [{ name: 'reaktor-console', version: '1.0.0', dir: CONSOLE_DIR, publicDir: path.join(CONSOLE_DIR, 'public') }, fleet]
  })
  const browser = await launchChromium(t)
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
  const page = await context.newPage()
  await page.goto(base + CONSOLE_PATH)
  await page.getByLabel('Username').fill(ADMIN.username)
  await page.getByLabel('Password').fill(ADMIN.password)
  await Promise.all([page.waitForURL(base + CONSOLE_PATH), page.getByRole('button', { name: 'Sign in' }).click()])
  await page.locator('table.reaktors tbody tr').nth(49).waitFor({ timeout: 60_000 })

  // Navigation to the first frame with the 50 rows painted (from the page's navigation start).
  const firstPaint: number[] = []
  for (let i = 0; i < 5; i++) {
    await page.reload({ waitUntil: 'commit' })
    const handle = await page.waitForFunction(() => document.querySelectorAll('table.reaktors tbody tr').length === 50 && performance.now(), undefined, { polling: 'raf', timeout: 60_000 })
    firstPaint.push(await handle.jsonValue() as number)
  }
  t.comment(`navigation → first table paint: ${stats(firstPaint)} (${firstPaint.map((x) => x.toFixed(0)).join(', ')})`)

  // Refreshes: the list request (resource timing) and the cycle beyond the 1 s wait.
  await page.evaluate(() => performance.clearResourceTimings())
  await page.waitForFunction(() => performance.getEntriesByType('resource').filter((e) => e.name.includes('/api/v1/polling?')).length >= 21, undefined, { timeout: 60_000, polling: 200 })
  const entries = await page.evaluate(() => performance.getEntriesByType('resource').filter((e) => e.name.includes('/api/v1/polling?')).map((e) => ({ start: e.startTime, end: (e as PerformanceResourceTiming).responseEnd, size: (e as PerformanceResourceTiming).transferSize })))
  const request = entries.map((e) => e.end - e.start)
  const rest = entries.slice(1).map((e, i) => e.start - entries[i].end - 1000)
  t.comment(`per refresh, the list request: ${stats(request)}; ${entries[0].size} bytes on the wire`)
  t.comment(`per refresh, the rest of the cycle (parse, update the rows, schedule): ${stats(rest)}`)
  t.comment(`refresh period: ${stats(entries.slice(1).map((e, i) => e.start - entries[i].start))}`)

  // Filter and sort over all of them (answered by the server): click → the new page shown.
  const changes: Record<string, number> = {}
  for (const [what, action, check] of [
    ['sort by next run', () => page.locator('th[data-key="nextRun"] button').click(), () => document.querySelector('th[data-key="nextRun"]')?.getAttribute('aria-sort') === 'ascending'],
    ['failing only', () => page.locator('.states button[data-state="failing"]').click(), () => document.querySelector('.pager .range')?.textContent?.endsWith(' of 1,000')],
    // Typing waits 250 ms for the next key before it asks: included here.
    ['text filter "bench 99"', async () => { await page.locator('.states button[data-state="all"]').click(); await page.getByLabel('Filter').fill('bench 99') }, () => document.querySelector('.pager .range')?.textContent?.endsWith(' of 111')]
  ] as const) {
    const start = await page.evaluate(() => performance.now())
    await action()
    const handle = await page.waitForFunction(check as () => boolean, undefined, { polling: 'raf', timeout: 30_000 }).catch(async (err) => {
      throw new Error(`${what}: ${String(err)}; the page shows ${await page.locator('.pager .range').textContent()}`)
    })
    await handle.dispose()
    changes[what] = await page.evaluate(() => performance.now()) - start
  }
  t.comment(`click → new page shown: ${Object.entries(changes).map(([k, v]) => `${k} ${v.toFixed(0)} ms`).join('; ')}`)
  t.pass('measured')
})
