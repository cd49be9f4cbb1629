/**
 * The console's apps page in a real headless Chromium, on two nodes of one database: an admin
 * publishes an app by uploading the .tgz of `npm pack`, stores a second version without activating
 * it, activates it, rolls back, deletes a version and then the app, each confirmed in a dialog and
 * checked against the API; a package that would not load (422) and other bytes under a stored
 * version (409) are refused with the API's message under the form; a node that cannot load the app
 * (a setting it sets wrong) is marked with its error; and no policy violation happens.
 */
import path from 'node:path'
import t from 'tap'
import type { Page } from 'playwright-core'
import { build } from '../helpers/app.js'
import { npmPack, writeApp } from '../helpers/app-folder.js'
import { ADMIN, ADMIN_ENV, apiAs, loginToken } from '../helpers/auth.js'
import { browserTests, confirmDialog, listeningApp, submitLogin } from '../helpers/browser.js'
import { createTestDatabase } from '../helpers/database.js'
import { ARTIFACTS_DIR, EXAMPLE_APPS_DIR } from '../helpers/paths.js'
import { tempDir } from '../helpers/temp-dir.js'
import { deadline, waitFor } from '../helpers/timing.js'
import type { AppDefinition } from '../../src/apps/types.js'


const CONSOLE_DIR = path.join(EXAMPLE_APPS_DIR, 'reaktor-console')
const CONSOLE: AppDefinition = { name: 'reaktor-console', version: '1.0.0', dir: CONSOLE_DIR, publicDir: path.join(CONSOLE_DIR, 'public') }
const CONSOLE_PATH = '/app-ui/reaktor-console@1.0.0/'
const APP = 'console-demo'
/** The second node sets the app's numeric setting to what is not JSON: it cannot load any version. */
const BAD_SETTING = { REAKTOR_SETTING_CONSOLE_DEMO_LIMIT: 'ten' }

/** An app with a setting, an aktor answering its version, and a page. */
function files (version: string, extra = ''): Record<string, string> {
  return {
    'package.json': JSON.stringify({ name: APP, version, type: 'module', main: 'index.js', reaktor: { settings: { limit: 10 } } }),
    'index.js': `export const reaktors = [{ reaktorDefinitionId: 'console-demo-which', createReaktor: () => async () => ({ version: '${version}' }) }]\n${extra}`,
    'public/index.html': `<!doctype html><title>${APP} ${version}</title><p>version ${version}</p>\n`
  }
}

/** `npm pack` of a folder `name` (under `root`) with these files: the path of the tarball. */
async function pack (root: string, name: string, contents: Record<string, string>): Promise<string> {
  return await npmPack(await writeApp(root, name, undefined, contents))
}

browserTests((browser) => {

  /** Chooses the package file and publishes it, confirmed. */
  async function publish (page: Page, file: string): Promise<void> {
    await page.getByLabel('Package (.tgz)').setInputFiles(file)
    await page.getByRole('button', { name: 'Publish', exact: true }).click()
    await confirmDialog(page, 'Publish')
  }

  t.test('an admin publishes by upload, activates, rolls back and deletes; refusals and a failing node show in place', async (t) => {
    const databaseUrl = await createTestDatabase(t)
    const packages = await tempDir(t, 'console-apps-')
    const [{ app, base }, v1, v2, broken, clash] = await Promise.all([
      (async () => {
        const first = await listeningApp(t, { env: ADMIN_ENV, apps: [CONSOLE], databaseUrl })
        await build(t, { env: { ...ADMIN_ENV, ...BAD_SETTING, NODE_ID: 'node-b' }, databaseUrl })
        return first
      })(),
      pack(packages, 'v1', files('1.0.0')),
      pack(packages, 'v2', files('2.0.0')),
      pack(packages, 'broken', files('3.0.0', 'export const broken = (1,\nexport const x = 2\n')),
      pack(packages, 'clash', files('1.0.0', '// other bytes\n'))
    ])
    const api = apiAs(app, await loginToken(app))
    const shown = async (): Promise<{ activeVersion: string, versions: string[] }> => {
      const { body } = await api('GET', `/api/v1/apps/${APP}`)
      return { activeVersion: body.activeVersion, versions: body.versions.map((v: { version: string }) => v.version) }
    }

    const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' })
    t.teardown(async () => await context.close())
    // Every policy violation of the console's pages, as the page itself hears of them.
    await context.addInitScript(() => {
      const seen: string[] = []
      Object.assign(window, { violations: seen })
      document.addEventListener('securitypolicyviolation', (e) => seen.push(`${e.violatedDirective} ${e.blockedURI}`))
    })
    const page = await context.newPage()
    const problems: string[] = []
    page.on('pageerror', (e) => problems.push(e.message))
    // The 4xx answers this test provokes are logged as errors too: those are expected, a policy violation is not.
    page.on('console', (m) => { if (m.type() === 'error' && /Content Security Policy|Refused to/.test(m.text())) problems.push(m.text()) })
    const violations = async (): Promise<string[]> => await page.evaluate(() => (window as unknown as { violations: string[] }).violations)

    await page.goto(`${base}${CONSOLE_PATH}#/apps`)
    await page.waitForURL((url) => url.pathname === '/login')
    await submitLogin(page, ADMIN, `${base}${CONSOLE_PATH}#/apps`)
    await page.getByText('No app is published yet.').waitFor()
    t.equal(await page.getByRole('link', { name: 'Apps', exact: true }).getAttribute('aria-current'), 'page', 'the Apps item is the current one')

    // The first version, uploaded: the page moves to the app, which runs it.
    await publish(page, v1)
    await page.waitForURL(`${base}${CONSOLE_PATH}#/apps/${APP}`)
    const details = page.locator(`section[data-app="${APP}"]`)
    const version = (v: string) => details.locator(`tr[data-version="${v}"]`)
    await version('1.0.0').locator('.badge', { hasText: 'active' }).waitFor()
    await page.locator('#toast').filter({ hasText: `Published ${APP}@1.0.0: every node switches to it` }).waitFor()
    t.same(await shown(), { activeVersion: '1.0.0', versions: ['1.0.0'] }, 'the upload is the active version')
    t.same((await api('POST', '/api/v1/aktor/console-demo-which', {})).body, { version: '1.0.0' }, 'and its aktor answers')
    t.match(await page.locator(`.apps-list tr[data-app="${APP}"]`).textContent(), /1\.0\.0/, 'the list shows the app with its active version')

    // Refusals show under the form, the API's message as it is; nothing is stored.
    const formError = page.locator('.publish-form .inline-error')
    await publish(page, broken)
    await formError.filter({ hasText: 'The package would not load' }).waitFor()
    t.match(await formError.textContent(), /^The package would not load: app console-demo@3\.0\.0: entry module "index\.js" failed to import: SyntaxError at index\.js:3:1/)
    t.match(await formError.locator('.message-detail').textContent(), /^ {4}export const x = 2\n {4}\^+$/, 'the source line and its caret keep their columns')
    await page.locator('.publish-form').screenshot({ path: path.join(ARTIFACTS_DIR, 'console-apps-refused.png'), animations: 'disabled' })
    await publish(page, clash)
    await formError.filter({ hasText: 'already published with other contents' }).waitFor()
    t.same(await shown(), { activeVersion: '1.0.0', versions: ['1.0.0'] }, 'neither was stored')

    // The second version, stored only; the error under the form goes with the next try.
    await page.getByLabel('Do not activate').check()
    await publish(page, v2)
    await version('2.0.0').waitFor()
    t.equal(await formError.isHidden(), true, 'the earlier refusal is gone')
    t.equal(await page.getByLabel('Do not activate').isChecked(), false, 'the form is reset')
    t.same(await shown(), { activeVersion: '1.0.0', versions: ['2.0.0', '1.0.0'] }, 'stored, not active')
    t.equal(await version('2.0.0').locator('.badge', { hasText: 'active' }).count(), 0)
    t.equal(await version('1.0.0').getByRole('button', { name: 'Delete' }).count(), 0, 'the active version offers no Delete')

    // The second node could not load it: its row is marked, with the reason.
    const nodeB = details.locator('tr[data-node="node-b"]')
    await nodeB.locator('td.error', { hasText: 'REAKTOR_SETTING_CONSOLE_DEMO_LIMIT is not valid JSON' }).waitFor({ timeout: deadline(10_000) })
    t.equal(await nodeB.getAttribute('class'), 'failing', 'the failing node is highlighted')
    t.match(await details.locator('tr[data-node="test-node"]').textContent(), /1\.0\.0 active/, 'the first node runs the active version')

    // Activate the newer one.
    await version('2.0.0').getByRole('button', { name: 'Activate' }).click()
    await confirmDialog(page, 'Activate')
    await version('2.0.0').locator('.badge', { hasText: 'active' }).waitFor()
    t.same(await shown(), { activeVersion: '2.0.0', versions: ['2.0.0', '1.0.0'] }, 'activated')
    t.same((await api('POST', '/api/v1/aktor/console-demo-which', {})).body, { version: '2.0.0' }, 'the node runs it')
    await details.locator('tr[data-node="test-node"]', { hasText: '2.0.0 active' }).waitFor()
    await nodeB.locator('td.error', { hasText: 'console-demo@2.0.0' }).waitFor({ timeout: deadline(10_000) })
    // The toast of the activation fades by itself; the screenshot is of the page under it.
    await page.locator('#toast').evaluate((el) => el.classList.remove('shown'))
    await page.screenshot({ path: path.join(ARTIFACTS_DIR, 'console-apps.png'), fullPage: true, animations: 'disabled' })
    await page.setViewportSize({ width: 390, height: 844 })
    t.ok(await page.evaluate(() => document.documentElement.scrollWidth <= 390), 'nothing wider than a phone')
    await page.screenshot({ path: path.join(ARTIFACTS_DIR, 'console-apps-phone.png'), fullPage: true, animations: 'disabled' })
    await page.setViewportSize({ width: 1280, height: 800 })
    await page.emulateMedia({ colorScheme: 'dark' })
    await page.screenshot({ path: path.join(ARTIFACTS_DIR, 'console-apps-dark.png'), fullPage: true, animations: 'disabled' })
    await page.emulateMedia({ colorScheme: 'light' })

    // Roll back: the next older version.
    await details.getByRole('button', { name: 'Roll back to 1.0.0' }).click()
    await confirmDialog(page, 'Roll back')
    await version('1.0.0').locator('.badge', { hasText: 'active' }).waitFor()
    t.same(await shown(), { activeVersion: '1.0.0', versions: ['2.0.0', '1.0.0'] }, 'rolled back')
    t.same((await api('POST', '/api/v1/aktor/console-demo-which', {})).body, { version: '1.0.0' })
    t.equal(await details.getByRole('button', { name: /^Roll back/ }).count(), 0, 'nothing older to roll back to')

    // An operator sees the same, without a control to change anything.
    t.equal((await api('POST', '/api/v1/users', { username: 'olga', role: 'operator', password: 'olga password 12' })).statusCode, 201)
    const operator = await browser.newContext({ viewport: { width: 1280, height: 800 } })
    t.teardown(async () => await operator.close())
    const operatorPage = await operator.newPage()
    operatorPage.on('pageerror', (e) => problems.push(e.message))
    await operatorPage.goto(`${base}${CONSOLE_PATH}#/apps/${APP}`)
    await operatorPage.waitForURL((url) => url.pathname === '/login')
    await submitLogin(operatorPage, { username: 'olga', password: 'olga password 12' }, `${base}${CONSOLE_PATH}#/apps/${APP}`)
    const operatorView = operatorPage.locator(`section[data-app="${APP}"]`)
    await operatorView.locator('tr[data-version="2.0.0"]').waitFor()
    await operatorPage.getByText('Only admins publish, activate and delete apps.').waitFor()
    t.equal(await operatorPage.locator('#view button, #view input').count(), 0, 'no button and no input for an operator')
    t.equal(await operatorView.locator('tr[data-node="node-b"].failing').count(), 1, 'the failing node is shown to an operator too')

    // Delete the version no longer active; then the app.
    await version('2.0.0').getByRole('button', { name: 'Delete' }).click()
    await confirmDialog(page, 'Delete version')
    await version('2.0.0').waitFor({ state: 'detached' })
    t.same(await shown(), { activeVersion: '1.0.0', versions: ['1.0.0'] }, 'the version is deleted')
    await details.getByRole('button', { name: 'Delete app' }).click()
    await confirmDialog(page, 'Delete app')
    await page.waitForURL(`${base}${CONSOLE_PATH}#/apps`)
    await page.getByText('No app is published yet.').waitFor()
    t.equal((await api('GET', `/api/v1/apps/${APP}`)).statusCode, 404, 'the app is deleted')

    t.same(problems, [], 'no script error or policy violation')
    t.same(await violations(), [], 'no policy violation event')
    // The listener hears one: an inline script, which the policy blocks.
    await page.evaluate(() => { const s = document.createElement('script'); s.textContent = 'void 0'; document.body.append(s) })
    await waitFor(async () => (await violations()).length === 1, { what: 'the inline script to be reported' })
    t.match((await violations())[0], /^script-src/)
  })
})
