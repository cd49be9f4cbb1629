/**
 * The UI `reaktor new-app --ui` writes, in a real headless Chromium on a service that loaded the
 * new app: it works under the app UI policy (no violation, no script error), calls its aktor and
 * its poller with the session token, and a session ended elsewhere (a 401) leads to the login
 * page and back to the app, to the place in it (#hash) too.
 */
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { browserTests, listeningApp, submitLogin } from '../helpers/browser.js'
import { ADMIN, ADMIN_ENV } from '../helpers/auth.js'
import { runCliInProcess } from '../helpers/cli.js'
import { tempDir } from '../helpers/temp-dir.js'
import { ARTIFACTS_DIR } from '../helpers/paths.js'
import { deadline } from '../helpers/timing.js'

const APP_UI = '/app-ui/my-app@0.1.0/'

browserTests((browser) => {
  t.test('the new app\'s UI calls its aktor and poller, and a lost session goes to the login page and back', async (t) => {
    const appsDir = await tempDir(t)
    const created = await runCliInProcess(['new-app', 'my-app', '--ui', '--dir', appsDir])
    t.equal(created.code, 0, created.stderr)
    const { base } = await listeningApp(t, { env: { ...ADMIN_ENV, REAKTOR_APPS_DIR: appsDir, REAKTOR_SETTING_MY_APP_GREETING: 'Good morning' } })

    const context = await browser.newContext({ viewport: { width: 900, height: 720 } })
    t.teardown(async () => await context.close())
    const tab = await context.newPage()
    const problems: string[] = []
    tab.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()) })
    tab.on('pageerror', (e) => problems.push(e.message))
    const unauthorized: string[] = []
    tab.on('response', (r) => { if (r.status() === 401) unauthorized.push(new URL(r.url()).pathname) })

    // Not logged in: the service sends the browser to the login page, which brings it back.
    await tab.goto(`${base}${APP_UI}`)
    t.equal(new URL(tab.url()).pathname, '/login')
    await submitLogin(tab, ADMIN, `${base}${APP_UI}`)
    await tab.getByText('stopped', { exact: true }).waitFor()
    t.equal(await tab.title(), 'my-app')
    t.equal(await tab.locator('#interval').textContent(), '1m', 'the poller\'s status, read with the session token')

    await tab.getByLabel('Name').fill('Grace')
    await tab.getByRole('button', { name: 'Say hello' }).click()
    await tab.getByText('Good morning, Grace!').waitFor()
    t.pass('the aktor answered with the app\'s setting')

    await tab.getByRole('button', { name: 'Start' }).click()
    await tab.locator('#state.running').waitFor()
    await tab.locator('#last-run').filter({ hasNotText: 'never' }).waitFor()
    t.ok(await tab.getByRole('button', { name: 'Start' }).isDisabled(), 'running: Start is disabled')
    t.match(await tab.locator('#message').textContent(), /my-app-poll/, 'the service\'s answer is shown')
    t.same(problems, [], 'no policy violation and no script error')
    fs.mkdirSync(ARTIFACTS_DIR, { recursive: true })
    await tab.screenshot({ path: path.join(ARTIFACTS_DIR, 'scaffold-ui.png'), fullPage: true })

    // A refresh that fails shows why; the next one that succeeds takes the message away.
    const status = `**/api/v1/polling/my-app-poll/status`
    await tab.route(status, async (route) => await route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify({ message: 'down for a moment' }) }))
    await tab.locator('#message.error').filter({ hasText: 'down for a moment' }).waitFor()
    await tab.unroute(status)
    await tab.locator('#message:not(.error)').filter({ hasText: /^$/ }).waitFor({ timeout: deadline(20_000) })
    t.pass('a refresh error is cleared once refreshing works again')

    // The session ends elsewhere (signed out from a script); the page still holds its cookie, so
    // its next call is refused: 401 leads to the login page, which brings the user back.
    const token = await tab.evaluate(() => (window as any).getServiceAuthToken() as string)
    const logout = await fetch(`${base}/api/v1/auth/logout`, { method: 'POST', headers: { 'x-service-token': token } })
    t.equal(logout.status, 200, 'signed out')
    await Promise.all([
      tab.waitForURL((url) => url.pathname === '/login'),
      tab.getByRole('button', { name: 'Say hello' }).click()
    ])
    t.ok(unauthorized.length > 0, `the API answered 401 (${unauthorized.join(', ')})`)
    t.equal(new URL(tab.url()).searchParams.get('redirect'), APP_UI, 'the login page will lead back to the app')
    await submitLogin(tab, ADMIN, `${base}${APP_UI}`)
    await tab.getByRole('button', { name: 'Say hello' }).click()
    await tab.getByText('Good morning, Ada!').waitFor()
    t.pass('back on the app, logged in again, the aktor answers')

    // At a #hash (a place in the page a link led to), a lost session keeps it: the login page
    // brings the browser back to that very place, as the console does with its views.
    await tab.goto(`${base}${APP_UI}#greeting`)
    const second = await tab.evaluate(() => (window as any).getServiceAuthToken() as string)
    t.equal((await fetch(`${base}/api/v1/auth/logout`, { method: 'POST', headers: { 'x-service-token': second } })).status, 200, 'signed out again')
    // No click this time: the page's own status refresh meets the 401.
    await tab.waitForURL((url) => url.pathname === '/login')
    t.equal(new URL(tab.url()).searchParams.get('redirect'), `${APP_UI}#greeting`, 'the redirect keeps the hash')
    await submitLogin(tab, ADMIN, `${base}${APP_UI}#greeting`)
    await tab.locator('#state.running').waitFor()
    t.pass('signed in again, back on the app at its hash')
    // The refused call is the one error the browser itself reports (a failed resource load).
    t.same(problems.filter((p) => !/status of (401|503)/.test(p)), [], 'still no policy violation and no script error')
  })
})
