import { existsSync } from 'node:fs'
import { chromium, type Browser } from 'playwright-core'
import type { TestContext } from './context.js'

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
