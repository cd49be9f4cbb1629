import { existsSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { chromium, type Browser, type Page } from 'playwright-core'
import { build, type BuildOptions } from './app.js'
import type { Credentials } from './auth.js'
import type { TestContext } from './test-context.js'

/** Debian's Chromium (never a browser downloaded by npm). */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'

/** The flags every browser test runs with (root in CI containers, no network but loopback). */
const CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run']

/**
 * Whether browser tests can run. Without Chromium they are skipped on a developer's machine, with a
 * reason naming the package to install; under CI (CI=true) a missing Chromium fails the run
 * instead, so browser coverage can never silently disappear there.
 */
export function browserSkip (): string | false {
  if (existsSync(CHROMIUM)) return false
  const reason = `no Chromium at ${CHROMIUM}: install the Debian package chromium (or set CHROMIUM_PATH) to run the browser tests`
  if (process.env.CI === 'true' || process.env.CI === '1') throw new Error(reason)
  return reason
}

export async function launchChromium (t: TestContext, extraArgs: string[] = []): Promise<Browser> {
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: [...CHROMIUM_FLAGS, ...extraArgs] })
  t.teardown(async () => await browser.close())
  return browser
}

/**
 * The browser tests of one file: one Chromium for all of them, launched before the first and closed
 * after the last, reached through `browser.newContext`. Without Chromium, `tests` is not called
 * and the file reports the skip with its reason (browserSkip: under CI that fails instead).
 */
export function browserTests (tests: (browser: Pick<Browser, 'newContext'>) => void, extraArgs: string[] = []): void {
  const skip = browserSkip()
  if (skip !== false) {
    t.test('browser tests', { skip }, () => {})
    return
  }
  let launched: Browser | undefined
  t.before(async () => { launched = await launchChromium(t, extraArgs) })
  tests({ newContext: async (options) => await launched!.newContext(options) })
}

/** The app built as `build` does, listening on loopback for a browser; `base` is its origin. */
export async function listeningApp (t: TestContext, opts: BuildOptions = {}): Promise<{ app: FastifyInstance, base: string }> {
  const app = await build(t, opts)
  return { app, base: await app.listen({ port: 0, host: '127.0.0.1' }) }
}

/**
 * Signs in on the login page `page` shows, as a person would (labels, the Sign in button), and
 * resolves once the browser has landed on `landing` (where the login page's redirect leads).
 */
export async function submitLogin (page: Page, creds: Credentials, landing: Parameters<Page['waitForURL']>[0]): Promise<void> {
  await page.getByLabel('Username').fill(creds.username)
  await page.getByLabel('Password').fill(creds.password)
  await Promise.all([page.waitForURL(landing), page.getByRole('button', { name: 'Sign in' }).click()])
}

/** Confirms the open dialog (the console's confirmations) with its button `label`, and waits for it to close. */
export async function confirmDialog (page: Page, label: string): Promise<void> {
  const dialog = page.getByRole('dialog')
  await dialog.waitFor()
  await dialog.getByRole('button', { name: label }).click()
  await dialog.waitFor({ state: 'detached' })
}

/** The browser flag that gives `crossSitePage` its own site (a different host than the service's). */
export const CROSS_SITE_FLAG = '--host-resolver-rules=MAP attacker.test 127.0.0.1'

/** A page of another site (needs `CROSS_SITE_FLAG`) that serves `html`; its URL. */
export async function crossSitePage (t: TestContext, html: string): Promise<string> {
  const server = http.createServer((_req, res) => {
    res.setHeader('content-type', 'text/html')
    res.end(html)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => server.close())
  return `http://attacker.test:${(server.address() as AddressInfo).port}/`
}
