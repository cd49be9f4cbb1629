/**
 * The console's users and API tokens views in a real headless Chromium, against a service that
 * serves the reaktor-console app from reaktor-apps/: what an admin and an operator do there, that
 * every answer (errors included) shows where it belongs, that the secrets shown once work against
 * the API, and that a 401 anywhere goes through the login page back to the same view.
 */
import fs from 'node:fs'
import path from 'node:path'
import t, { type Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { SESSION_COOKIE } from '../../src/auth/types.js'
import { ADMIN, ADMIN_ENV, apiAs, apiLogin, createApiToken, loginToken, type Credentials } from '../helpers/auth.js'
import { browserTests, confirmDialog, listeningApp, submitLogin } from '../helpers/browser.js'
import { cliHome, runCli } from '../helpers/cli.js'
import type { TestContext } from '../helpers/test-context.js'
import { waitFor } from '../helpers/timing.js'
import { ARTIFACTS_DIR, EXAMPLE_APPS_DIR } from '../helpers/paths.js'

const CONSOLE = '/app-ui/reaktor-console@1.0.0/'

browserTests((browser) => {

  async function startService (t: TestContext): Promise<{ app: FastifyInstance, base: string }> {
    return await listeningApp(t, { env: { ...ADMIN_ENV, REAKTOR_APPS_DIR: EXAMPLE_APPS_DIR } })
  }

  /** A fresh browser profile; `problems` collects script errors and policy violations of its pages. */
  async function newContext (t: TestContext, opts: Parameters<Browser['newContext']>[0] = {}): Promise<{ context: BrowserContext, problems: string[] }> {
    const context = await browser.newContext(opts)
    t.teardown(async () => await context.close())
    const problems: string[] = []
    context.on('page', (page) => {
      page.on('pageerror', (e) => problems.push(e.message))
      // A 4xx of a fetch is logged as an error as well: those are expected here, a policy violation is not.
      page.on('console', (m) => { if (m.type() === 'error' && /Content Security Policy|Refused to/.test(m.text())) problems.push(m.text()) })
    })
    return { context, problems }
  }

  /**
   * Opens a link to one view of the console without a session: the service sends the browser to the
   * login page (the `#…` stays in the address bar only: the server never sees it), whose script
   * keeps it, so signing in lands on that very view.
   */
  async function signIn (t: Test, page: Page, base: string, creds: Credentials, hash: string): Promise<void> {
    await page.goto(`${base}${CONSOLE}${hash}`)
    await page.waitForURL((url) => url.pathname === '/login')
    t.equal(new URL(page.url()).searchParams.get('redirect'), CONSOLE, 'the service sends the browser to sign in, back to the console')
    await submitLogin(page, creds, `${base}${CONSOLE}${hash}`)
    await page.locator('#who').filter({ hasText: creds.username }).waitFor()
  }

  /** The row of one user or token in the view's table. */
  const userRow = (page: Page, username: string) => page.locator(`tr[data-username="${username}"]`)

  async function screenshot (page: Page, name: string): Promise<void> {
    fs.mkdirSync(ARTIFACTS_DIR, { recursive: true })
    await page.screenshot({ path: path.join(ARTIFACTS_DIR, name), fullPage: true })
  }

  async function userOf (app: FastifyInstance, username: string): Promise<{ statusCode: number, body: any }> {
    return await apiAs(app, await loginToken(app))('GET', `/api/v1/users/${username}`)
  }

  t.test('an admin creates, changes, disables, resets and deletes an operator', async (t) => {
    const { app, base } = await startService(t)
    const { context, problems } = await newContext(t)
    const page = await context.newPage()
    await signIn(t, page, base, ADMIN, '#/users')
    t.equal(await page.locator('#who').textContent(), `${ADMIN.username} (admin)`, 'the header names the user and the role')
    t.ok(await page.getByRole('link', { name: 'Users' }).isVisible(), 'an admin has the Users item')
    t.equal(await page.locator('#toast').getAttribute('aria-live'), 'polite', 'results are announced')
    await userRow(page, ADMIN.username).waitFor()

    // Create without a password: the generated one is shown once.
    await page.getByLabel('Username').fill('bob')
    await page.getByLabel('Role', { exact: true }).selectOption('operator')
    await page.getByRole('button', { name: 'Create user' }).click()
    const secret = page.locator('[data-secret="password"]')
    await secret.waitFor()
    const generated = await secret.textContent() ?? ''
    t.ok(generated.length >= 12, 'a generated password is shown')
    t.match(await page.locator('.secret-box').textContent(), /will not be shown again/)
    await userRow(page, 'bob').waitFor()
    t.match(await userRow(page, 'bob').textContent(), /enabled/)
    t.equal(await userRow(page, 'bob').getByLabel('Role of bob').inputValue(), 'operator')
    await screenshot(page, 'console-users.png')
    // Without the clipboard API (a page not in a secure context has none), Copy selects the password.
    // (A string: the test compiler would wrap a function's inner getter in a helper the page lacks.)
    await page.evaluate('Object.defineProperty(Navigator.prototype, "clipboard", { value: undefined })')
    await page.locator('.secret-box').getByRole('button', { name: 'Copy' }).click()
    await page.locator('#toast').filter({ hasText: 'Selected: press Ctrl+C' }).waitFor()
    t.equal(await page.evaluate(() => window.getSelection()?.toString()), generated, 'Copy selected the password instead')
    await page.setViewportSize({ width: 390, height: 844 })
    t.ok(await page.evaluate(() => document.documentElement.scrollWidth <= 390), 'nothing wider than a phone')
    await screenshot(page, 'console-users-phone.png')
    await page.setViewportSize({ width: 1280, height: 720 })
    await page.reload()
    await userRow(page, 'bob').waitFor()
    t.equal(await secret.count(), 0, 'after a reload the password is gone: shown once')

    // The operator signs in with it, in a browser of their own.
    const bob = await newContext(t)
    const bobPage = await bob.context.newPage()
    await signIn(t, bobPage, base, { username: 'bob', password: generated }, '#/tokens')
    t.equal(await bobPage.locator('#who').textContent(), 'bob (operator)')
    t.notOk(await bobPage.getByRole('link', { name: 'Users' }).isVisible(), 'no Users item for an operator')

    // Change the role: the select answers at once, the API agrees.
    await userRow(page, 'bob').getByLabel('Role of bob').selectOption('admin')
    await page.locator('#toast').filter({ hasText: 'bob is now an admin' }).waitFor()
    t.equal((await userOf(app, 'bob')).body.role, 'admin')
    await userRow(page, 'bob').getByLabel('Role of bob').selectOption('operator')
    await page.locator('#toast').filter({ hasText: 'bob is now an operator' }).waitFor()
    t.equal((await userOf(app, 'bob')).body.role, 'operator')

    // Disable: confirmed in a dialog; bob's open console goes to the login page on its next call.
    await userRow(page, 'bob').getByRole('button', { name: 'Disable' }).click()
    await confirmDialog(page, 'Disable')
    await userRow(page, 'bob').locator('.badge', { hasText: 'disabled' }).waitFor()
    t.equal((await userOf(app, 'bob')).body.disabled, true)
    t.equal(await page.evaluate(() => (document.activeElement as HTMLElement).textContent), 'Enable', 'the focus is on the row\'s button again')
    await bobPage.evaluate(() => { window.location.hash = '#/users' })
    await bobPage.getByText('Only admins manage users').waitFor()
    await bobPage.getByRole('link', { name: 'API tokens' }).click()
    await bobPage.waitForURL((url) => url.pathname === '/login')
    t.equal(new URL(bobPage.url()).searchParams.get('redirect'), `${CONSOLE}#/tokens`, 'bob\'s session ended: the console sent him to sign in')

    // The last enabled admin cannot be disabled: the 409 shows in that row.
    await userRow(page, ADMIN.username).getByRole('button', { name: 'Disable' }).click()
    await confirmDialog(page, 'Disable')
    const refused = userRow(page, ADMIN.username).locator('.inline-error')
    await refused.waitFor()
    t.match(await refused.textContent(), /is the last enabled admin/)
    t.equal((await userOf(app, ADMIN.username)).body.disabled, false)
    // Nor demoted: the select goes back to the role the user still has.
    const aliceRole = userRow(page, ADMIN.username).getByLabel(`Role of ${ADMIN.username}`)
    await Promise.all([
      page.waitForResponse((r) => r.url() === `${base}/api/v1/users/${ADMIN.username}` && r.status() === 409),
      aliceRole.selectOption('operator')
    ])
    await waitFor(async () => await aliceRole.inputValue() === 'admin', { what: 'the select to show admin again' })
    t.match(await refused.textContent(), /is the last enabled admin/)
    t.equal((await userOf(app, ADMIN.username)).body.role, 'admin')

    // Enable again, reset the password (generated): the new one works, the first one no longer.
    await userRow(page, 'bob').getByRole('button', { name: 'Enable' }).click()
    await userRow(page, 'bob').locator('.badge', { hasText: 'enabled' }).waitFor()
    await userRow(page, 'bob').getByRole('button', { name: 'Reset password' }).click()
    await confirmDialog(page, 'Reset password')
    await waitFor(async () => (await secret.count()) === 1 && await secret.textContent() !== generated, { what: 'the reset password to show' })
    const reset = await secret.textContent() ?? ''
    t.equal((await apiLogin(app, { username: 'bob', password: reset })).statusCode, 200, 'bob logs in with the reset password')
    t.equal((await apiLogin(app, { username: 'bob', password: generated })).statusCode, 401, 'not with the old one')

    // A typed password, chosen with the keyboard alone.
    await userRow(page, 'bob').getByRole('button', { name: 'Reset password' }).focus()
    await page.keyboard.press('Enter')
    const dialog = page.getByRole('dialog')
    await dialog.waitFor()
    await dialog.getByLabel('Type one').check()
    await page.keyboard.type('typed by the admin 1')
    t.equal(await dialog.getByLabel('Password (12 characters or more)').inputValue(), 'typed by the admin 1', 'choosing "Type one" moved the focus to its field')
    await dialog.getByRole('button', { name: 'Reset password' }).focus()
    const [typedReset] = await Promise.all([
      page.waitForResponse((r) => r.url() === `${base}/api/v1/users/bob/password`),
      page.keyboard.press('Enter')
    ])
    t.equal(typedReset.status(), 200)
    // The generated password shown before is stale now: it goes when the row shows the reset.
    await secret.waitFor({ state: 'detached' })
    t.equal(await page.evaluate(() => (document.activeElement as HTMLElement).dataset.action), 'reset', 'the focus is back on Reset password')
    t.equal((await apiLogin(app, { username: 'bob', password: 'typed by the admin 1' })).statusCode, 200, 'the typed password is bob\'s')

    // Delete with the keyboard: Escape cancels and gives the focus back; then confirm.
    const deleteButton = userRow(page, 'bob').getByRole('button', { name: 'Delete' })
    await deleteButton.focus()
    await page.keyboard.press('Enter')
    await dialog.waitFor()
    t.equal(await page.evaluate(() => document.activeElement?.textContent), 'Cancel', 'the dialog starts on Cancel')
    await page.emulateMedia({ colorScheme: 'dark' })
    await screenshot(page, 'console-dialog-dark.png')
    await page.emulateMedia({ colorScheme: 'light' })
    await page.keyboard.press('Escape')
    await dialog.waitFor({ state: 'detached' })
    t.equal(await page.evaluate(() => (document.activeElement as HTMLElement).dataset.action), 'delete', 'Escape gives the focus back to Delete')
    t.equal((await userOf(app, 'bob')).statusCode, 200, 'nothing was deleted')
    await page.keyboard.press('Enter')
    await dialog.waitFor()
    await page.keyboard.press('Tab')
    t.equal(await page.evaluate(() => document.activeElement?.textContent), 'Delete')
    await page.keyboard.press('Enter')
    await userRow(page, 'bob').waitFor({ state: 'detached' })
    t.equal((await userOf(app, 'bob')).statusCode, 404, 'bob is deleted')
    t.same(problems, [], 'no script error or policy violation')
    t.same(bob.problems, [])
  })

  t.test('tokens: an operator sees only their own, creates one, uses it, revokes it; changes the password', async (t) => {
    const { app, base } = await startService(t)
    const admin = apiAs(app, await loginToken(app))
    t.equal((await admin('POST', '/api/v1/users', { username: 'carol', role: 'operator', password: 'carol password 1' })).statusCode, 201)
    const adminToken = await createApiToken(app, await loginToken(app), { name: 'admin script' })

    const { context, problems } = await newContext(t, { permissions: ['clipboard-read', 'clipboard-write'] })
    const page = await context.newPage()
    const failed: string[] = []
    page.on('response', (r) => { if (new URL(r.url()).pathname.startsWith('/api/') && r.status() >= 400) failed.push(`${r.status()} ${r.url()}`) })
    const carol = { username: 'carol', password: 'carol password 1' }
    await signIn(t, page, base, carol, '#/users')
    await page.getByText('Only admins manage users').waitFor()
    t.same(failed, [], 'an operator on #/users: no request fails')
    await page.getByRole('link', { name: 'API tokens' }).click()
    await page.getByText('You have no API tokens yet.').waitFor()
    t.equal(await page.locator('.tokens-table th', { hasText: 'Owner' }).count(), 0, 'no owner column for an operator')

    // An expiry the API refuses: its message shows under the form.
    await page.getByLabel('Name', { exact: true }).fill('too short')
    await page.getByLabel('Expires in').selectOption('custom')
    await page.getByLabel('Lifetime').fill('0m')
    await page.getByRole('button', { name: 'Create token' }).click()
    const formError = page.locator('.create-form .inline-error')
    await formError.waitFor()
    t.match(await formError.textContent(), /expiresIn/)

    await page.getByLabel('Name', { exact: true }).fill('ci deploy')
    await page.getByLabel('Expires in').selectOption('30d')
    await page.getByRole('button', { name: 'Create token' }).click()
    const secret = page.locator('[data-secret="token"]')
    await secret.waitFor()
    const token = await secret.textContent() ?? ''
    t.match(token, /^reaktor_pat_[A-Za-z0-9_-]{43}$/)
    t.match(await page.locator('.secret-box').textContent(), /will not be shown again/)
    await page.locator('.secret-box').getByRole('button', { name: 'Copy' }).click()
    await page.locator('#toast').filter({ hasText: 'Copied' }).waitFor()
    t.equal(await page.evaluate(async () => await navigator.clipboard.readText()), token, 'Copy put the token on the clipboard')

    const me = await fetch(`${base}/api/v1/auth/me`, { headers: { 'x-service-token': token } })
    t.equal(me.status, 200)
    t.match(await me.json(), { username: 'carol', role: 'operator', kind: 'token' }, 'the token acts as carol')
    // The token copied from the console works in the command line, as a script would use it.
    const cliEnv = { REAKTOR_URL: base, REAKTOR_TOKEN: token, XDG_CONFIG_HOME: await cliHome(t) }
    const [whoami, polling] = await Promise.all([runCli(['whoami', '--json'], { env: cliEnv }), runCli(['polling', 'list', '--json'], { env: cliEnv })])
    t.equal(whoami.code, 0, `reaktor whoami with the console's token: ${whoami.stderr}`)
    t.match(JSON.parse(whoami.stdout), { username: 'carol', role: 'operator', kind: 'token' }, 'the command line acts as carol')
    t.equal(polling.code, 0, `reaktor polling list with the console's token: ${polling.stderr}`)
    t.ok(JSON.parse(polling.stdout).pollingReaktors.some((r: { reaktorDefinitionId: string }) => r.reaktorDefinitionId === 'heartbeat'), 'and lists the example apps\' reaktors')
    const rows = page.locator('.tokens-table tbody tr')
    await waitFor(async () => await rows.count() === 1, { what: 'one token listed' })
    t.match(await rows.first().textContent(), /ci deploy/, 'carol sees her token and not the admin\'s')
    t.notMatch(await rows.first().locator('td[data-label="Expires"]').textContent(), /never/, 'with its expiry')

    await screenshot(page, 'console-tokens.png')
    await page.emulateMedia({ colorScheme: 'dark' })
    t.equal(await page.evaluate(() => getComputedStyle(document.body).backgroundColor), 'rgb(18, 21, 28)', 'dark colours')
    await screenshot(page, 'console-tokens-dark.png')
    await page.emulateMedia({ colorScheme: 'light' })
    await page.setViewportSize({ width: 390, height: 844 })
    t.ok(await page.evaluate(() => document.documentElement.scrollWidth <= 390), 'nothing wider than a phone')
    await screenshot(page, 'console-tokens-phone.png')
    await page.setViewportSize({ width: 1280, height: 720 })

    // Revoke: the token is refused from then on.
    await rows.first().getByRole('button', { name: 'Revoke' }).click()
    await confirmDialog(page, 'Revoke')
    await page.getByText('You have no API tokens yet.').waitFor()
    t.equal((await fetch(`${base}/api/v1/auth/me`, { headers: { 'x-service-token': token } })).status, 401, 'the revoked token answers 401')
    t.equal((await runCli(['whoami'], { env: cliEnv })).code, 4, 'and the command line exits 4 with it')

    // The admin's list: everyone's, with the owner.
    const adminSide = await newContext(t)
    const adminPage = await adminSide.context.newPage()
    await signIn(t, adminPage, base, ADMIN, '#/tokens')
    const adminRow = adminPage.locator(`tr[data-token-id="${adminToken.id}"]`)
    await adminRow.waitFor()
    t.match(await adminRow.textContent(), new RegExp(`admin script${ADMIN.username}`), 'the admin sees the owner')
    t.equal(await adminPage.locator('.tokens-table th', { hasText: 'Owner' }).count(), 1)

    // My account: a wrong repetition, a wrong current password, then the change and a new sign-in.
    await page.getByLabel('Current password').fill('not it at all')
    await page.getByLabel('New password', { exact: true }).fill('carol password 2')
    await page.getByLabel('Repeat the new password').fill('carol password 3')
    await page.getByRole('button', { name: 'Change password' }).click()
    const accountError = page.locator('form[aria-labelledby="my-account-title"] .inline-error')
    await accountError.filter({ hasText: 'differ' }).waitFor()
    await page.getByLabel('Repeat the new password').fill('carol password 2')
    await page.getByRole('button', { name: 'Change password' }).click()
    await accountError.filter({ hasText: 'The current password is wrong.' }).waitFor()
    await page.getByLabel('Current password').fill(carol.password)
    await page.getByRole('button', { name: 'Change password' }).click()
    await page.waitForURL((url) => url.pathname === '/login')
    t.equal(new URL(page.url()).searchParams.get('redirect'), `${CONSOLE}#/tokens`)
    await submitLogin(page, { username: 'carol', password: 'carol password 2' }, `${base}${CONSOLE}#/tokens`)
    await page.getByText('You have no API tokens yet.').waitFor()
    t.same(problems, [], 'no script error or policy violation')
    t.same(adminSide.problems, [])
  })

  t.test('a 401 goes to the login page and back to the same view; signing out', async (t) => {
    const { base } = await startService(t)
    const { context, problems } = await newContext(t)
    const page = await context.newPage()
    await signIn(t, page, base, ADMIN, '#/users')
    await userRow(page, ADMIN.username).waitFor()

    // The session ends behind the console's back (as another tab's sign-out would end it).
    const session = (await context.cookies(base)).find((c) => c.name === SESSION_COOKIE)!.value
    t.equal((await fetch(`${base}/api/v1/auth/logout`, { method: 'POST', headers: { 'x-service-token': session } })).status, 200)
    await page.getByRole('link', { name: 'API tokens' }).click()
    await page.waitForURL((url) => url.pathname === '/login')
    t.equal(new URL(page.url()).searchParams.get('redirect'), `${CONSOLE}#/tokens`, 'the login page will bring the browser back to #/tokens')
    await submitLogin(page, ADMIN, `${base}${CONSOLE}#/tokens`)
    await page.getByRole('heading', { name: 'API tokens', exact: true }).waitFor()
    await page.getByText('No API tokens yet.').waitFor()

    // Sign out: the form post ends the session and lands on the login page.
    const token = (await context.cookies(base)).find((c) => c.name === SESSION_COOKIE)!.value
    await Promise.all([page.waitForURL(`${base}/login`), page.getByRole('button', { name: 'Sign out' }).click()])
    t.same((await context.cookies(base)).filter((c) => c.name === SESSION_COOKIE), [], 'no session cookie left')
    t.equal((await fetch(`${base}/api/v1/auth/me`, { headers: { 'x-service-token': token } })).status, 401, 'the session is refused')
    t.same(problems, [], 'no script error or policy violation')
  })
})
