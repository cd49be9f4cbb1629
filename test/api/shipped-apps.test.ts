/**
 * The apps shipped with the service: the console is served whatever REAKTOR_APPS_DIR holds (unless
 * CONSOLE=false, or an app of its name is loaded from there), and the examples load only with
 * EXAMPLE_APPS=true.
 */
import t from 'tap'
import { ADMIN_ENV, loginToken } from '../helpers/auth.js'
import { build } from '../helpers/app.js'
import { browse } from '../helpers/app-ui.js'

t.test('the console is served from the service whatever REAKTOR_APPS_DIR holds; the examples only when asked', async (t) => {
  const app = await build(t, { env: { ...ADMIN_ENV, CONSOLE: 'true' } })
  t.same(app.apps.apps.map((a) => a.name), ['reaktor-console'])
  const token = await loginToken(app)
  const page = await browse(app, '/app-ui/reaktor-console@1.0.0/', token)
  t.equal(page.statusCode, 200)
  t.match(page.body, /<title>[^<]*[Cc]onsole/)
  const home = await browse(app, '/', token)
  t.match(home.body, /<a class="console" href="\/app-ui\/reaktor-console@1\.0\.0\/">Open the console<\/a>/)

  const withExamples = await build(t, { env: { ...ADMIN_ENV, CONSOLE: 'true', EXAMPLE_APPS: 'true' } })
  t.same(withExamples.apps.apps.map((a) => a.name).sort(), ['drain-demo', 'heartbeat', 'reaktor-console'])
  t.ok(withExamples.apps.pollingReaktors.has('heartbeat'))

  const none = await build(t, { env: { ...ADMIN_ENV, CONSOLE: 'false' } })
  t.same(none.apps.apps, [], 'CONSOLE=false: no console')
})

t.test('CONSOLE and EXAMPLE_APPS take true or false', async (t) => {
  await t.rejects(build(t, { env: { ...ADMIN_ENV, CONSOLE: 'maybe' } }), { message: /CONSOLE: "maybe" is not allowed; expected true or false/ })
})
