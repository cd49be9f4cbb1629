/**
 * `reaktor new-app` and `reaktor test`: the files a new app starts from, the names it refuses, and
 * that what it writes works: the service loads it (its poller runs, its aktor answers with its
 * setting) and its own tests pass through `reaktor test`, which fails when they do.
 */
import fs from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { build } from '../helpers/app.js'
import { ADMIN_ENV, loggedIn } from '../helpers/auth.js'
import { runCli, runCliInProcess } from '../helpers/cli.js'
import { tempDir, waitFor } from '../helpers/context.js'

const APP_FILES = ['package.json', 'index.js', 'test/app.test.js']
const UI_FILES = ['public/index.html', 'public/app.js', 'public/style.css', 'public/favicon.svg']

async function filesUnder (dir: string): Promise<string[]> {
  const entries = await fs.readdir(dir, { recursive: true, withFileTypes: true })
  return entries.filter((e) => e.isFile()).map((e) => path.relative(dir, path.join(e.parentPath, e.name))).sort()
}

t.test('new-app writes an app to start from and says what to do next', async (t) => {
  const appsDir = await tempDir(t)
  const res = await runCliInProcess(['new-app', 'my-app', '--ui', '--dir', appsDir])
  t.equal(res.code, 0, res.stderr)
  const dir = path.join(appsDir, 'my-app')
  t.same(await filesUnder(dir), [...APP_FILES, ...UI_FILES].sort())

  const pkg = JSON.parse(await fs.readFile(path.join(dir, 'package.json'), 'utf8'))
  t.match(pkg, { name: 'my-app', version: '0.1.0', type: 'module', main: 'index.js', reaktor: { settings: { greeting: 'Hello' } } })
  t.match(pkg.scripts.test, /reaktor\.js test \.$/, 'npm test in the app runs its tests through reaktor test')
  const entry = await fs.readFile(path.join(dir, 'index.js'), 'utf8')
  t.match(entry, /definePollingReaktor/)
  t.match(entry, /reaktorDefinitionId: 'my-app-poll'/)
  t.match(entry, /reaktorDefinitionId: 'my-app-hello'/)
  t.match(await fs.readFile(path.join(dir, 'test/app.test.js'), 'utf8'), /from 'reaktor-service\/testing'/)
  const html = await fs.readFile(path.join(dir, 'public/index.html'), 'utf8')
  t.notMatch(html, /<script>|<script(?![^>]*\bsrc=)[^>]*>|\son[a-z]+=/i, 'no inline script and no on…= handler: the app UI policy blocks them')
  const script = await fs.readFile(path.join(dir, 'public/app.js'), 'utf8')
  for (const part of ['window.getServiceAuthToken()', "'X-Service-Token': token", 'res.status === 401', "'/login?redirect=' + encodeURIComponent(here)", '/api/v1/aktor/${AKTOR_ID}']) {
    t.ok(script.includes(part), `app.js: ${part}`)
  }

  t.match(res.stdout, /Created the reaktor app my-app in /)
  t.match(res.stdout, /npm run dev/, 'next steps: load it')
  t.match(res.stdout, /http:\/\/127\.0\.0\.1:3000\/app-ui\/my-app@0\.1\.0\//, 'next steps: its UI')
  t.match(res.stdout, new RegExp(`npx reaktor test ${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`), 'next steps: its tests')
  t.equal(res.stderr, '')
})

t.test('--json, a scoped name, and REAKTOR_APPS_DIR as the default folder', async (t) => {
  const appsDir = await tempDir(t)
  const res = await runCliInProcess(['--json', 'new-app', '@acme/widgets'], { env: { REAKTOR_APPS_DIR: appsDir } })
  t.equal(res.code, 0, res.stderr)
  const out = JSON.parse(res.stdout)
  const dir = path.join(appsDir, 'acme-widgets')
  t.same(out, {
    name: '@acme/widgets',
    version: '0.1.0',
    dir,
    files: APP_FILES,
    pollingReaktor: 'acme-widgets-poll',
    aktor: 'acme-widgets-hello',
    uiPath: null,
    test: `npx reaktor test ${dir}`
  })
  t.same(await filesUnder(dir), [...APP_FILES].sort(), 'no public/ without --ui')
  t.equal(JSON.parse(await fs.readFile(path.join(dir, 'package.json'), 'utf8')).name, '@acme/widgets')
})

t.test('a name the loader would refuse is a usage error, and nothing is written', async (t) => {
  const appsDir = await tempDir(t)
  for (const name of ['My-App', '.hidden', '_private', 'a b', '@acme', '@acme/', 'app/nested', 'node_modules', 'x'.repeat(215), '']) {
    const res = await runCliInProcess(['new-app', name, '--dir', appsDir])
    t.equal(res.code, 2, `${JSON.stringify(name)}: exit 2`)
    t.match(res.stderr, /^reaktor: app name .* (is not a valid package name|is longer than 214|never loads apps from)/, `${JSON.stringify(name)}: says why`)
    t.equal(res.stdout, '')
  }
  t.same(await fs.readdir(appsDir), [], 'nothing was created')
  t.equal((await runCliInProcess(['new-app'])).code, 2, 'no name: exit 2')
})

t.test('an existing folder with anything in it is refused and left as it was; an empty one is used', async (t) => {
  const appsDir = await tempDir(t)
  const dir = path.join(appsDir, 'taken')
  await fs.mkdir(dir)
  await fs.writeFile(path.join(dir, 'index.js'), 'my own work\n')
  const res = await runCliInProcess(['new-app', 'taken', '--dir', appsDir])
  t.equal(res.code, 1)
  t.match(res.stderr, /already exists and is not empty; nothing was written/)
  t.same(await fs.readdir(dir), ['index.js'])
  t.equal(await fs.readFile(path.join(dir, 'index.js'), 'utf8'), 'my own work\n', 'not overwritten')

  await fs.mkdir(path.join(appsDir, 'empty'))
  t.equal((await runCliInProcess(['new-app', 'empty', '--dir', appsDir])).code, 0, 'an empty folder takes the app')
  t.same(await filesUnder(path.join(appsDir, 'empty')), [...APP_FILES].sort())
})

t.test('the service loads new apps: the pollers are listed and run, the aktor answers with its setting', async (t) => {
  const appsDir = await tempDir(t)
  t.equal((await runCliInProcess(['new-app', 'my-app', '--ui', '--dir', appsDir])).code, 0)
  // A second app next to it: the ids derived from the names keep them apart.
  t.equal((await runCliInProcess(['new-app', '@acme/widgets', '--dir', appsDir])).code, 0)
  const app = await build(t, { env: { REAKTOR_APPS_DIR: appsDir, REAKTOR_SETTING_MY_APP_GREETING: 'Good morning', ...ADMIN_ENV } })
  const call = await loggedIn(app)

  const listed = await call('GET', '/api/v1/polling')
  t.same(listed.body.pollingReaktors.map((r: { reaktorDefinitionId: string }) => r.reaktorDefinitionId).sort(), ['acme-widgets-poll', 'my-app-poll'])
  t.match(listed.body.pollingReaktors.find((r: { reaktorDefinitionId: string }) => r.reaktorDefinitionId === 'my-app-poll'), { state: 'stopped', interval: '1m', label: 'my-app poller' })

  t.equal((await call('POST', '/api/v1/polling/my-app-poll/start')).statusCode, 200)
  const ran = await waitFor(async () => {
    const { body } = await call('GET', '/api/v1/polling/my-app-poll/status')
    return body.lastOutcome !== null && body
  }, { what: 'the first run of my-app-poll' })
  t.match(ran, { state: 'running', lastOutcome: 'no_work', consecutiveFailures: 0 })

  const hello = await call('POST', '/api/v1/aktor/my-app-hello', { name: 'Ada' })
  t.same(hello, { statusCode: 200, body: { message: 'Good morning, Ada!' } }, 'the setting, overridden by its variable')
  t.same((await call('POST', '/api/v1/aktor/acme-widgets-hello', { name: 'Ada' })).body, { message: 'Hello, Ada!' }, 'the default of package.json')
  t.equal((await call('POST', '/api/v1/aktor/my-app-hello', {})).statusCode, 400, 'its input schema wants a name')

  t.ok(app.apps.findApp('my-app', '0.1.0')?.publicDir, 'its UI folder is served')
})

t.test('reaktor test runs the app\'s own tests against this service and passes their failure on', async (t) => {
  const appsDir = await tempDir(t)
  t.equal((await runCliInProcess(['new-app', 'tested', '--dir', appsDir])).code, 0)
  const dir = path.join(appsDir, 'tested')

  const passed = await runCli(['test', dir], { timeoutMs: 60_000 })
  t.equal(passed.code, 0, passed.stderr)
  t.match(passed.stdout, /# pass 3\n/)
  t.match(passed.stdout, /# fail 0\n/)

  // The aktor changed without its test: the test fails, and so does the command.
  const entry = path.join(dir, 'index.js')
  await fs.writeFile(entry, (await fs.readFile(entry, 'utf8')).replace('`${String(settings.greeting)}, ${name}!`', '`Bye, ${name}`'))
  const failed = await runCli(['test', dir], { timeoutMs: 60_000 })
  t.equal(failed.code, 1, 'exit 1: a test failed')
  t.match(failed.stdout, /not ok \d+ - hello greets with the greeting setting/)
  t.match(failed.stdout, /# fail 1\n/)

  const notApp = await runCliInProcess(['test', appsDir])
  t.equal(notApp.code, 2)
  t.match(notApp.stderr, /is not a reaktor app folder \(no package\.json\)/)
})
