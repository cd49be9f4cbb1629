/**
 * `reaktor new-app` and `reaktor test`: the files a new app starts from, the names it refuses, and
 * that what it writes works: the service loads it (its poller runs, its aktor answers with its
 * setting) and its own tests pass through `reaktor test`, which fails when they do.
 */
import { spawn } from 'node:child_process'
import fs from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { MAX_REAKTOR_ID_LENGTH } from '../../src/apps/registry.js'
import { planApp } from '../../src/cli/app-plan.js'
import { npmTestScript } from '../../src/cli/commands/apps.js'
import { build } from '../helpers/app.js'
import { ADMIN_ENV, loggedIn } from '../helpers/auth.js'
import { runCli, runCliInProcess } from '../helpers/cli.js'
import { tempDir } from '../helpers/temp-dir.js'
import { deadline, waitFor } from '../helpers/timing.js'
import { ROOT } from '../helpers/paths.js'

// Node 20 reports in TAP to a pipe, Node 24 in its spec format: the tests read TAP, so they ask for it.
const TAP = '--test-reporter=tap'

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
  t.match(pkg.scripts.test, /reaktor\.js test \. --$/, 'npm test in the app runs its tests through reaktor test, its arguments going to node --test')
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
  for (const name of ['My-App', '.hidden', '_private', 'a b', '@acme', '@acme/', 'app/nested', 'node_modules', 'x'.repeat(215), '', '-rf']) {
    const res = await runCliInProcess(['new-app', '--dir', appsDir, '--', name])
    t.equal(res.code, 2, `${JSON.stringify(name)}: exit 2`)
    t.match(res.stderr, /^reaktor: app name .* (is not a valid package name|is longer than 214|never loads apps from|starts with -)/, `${JSON.stringify(name)}: says why`)
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
  // The longest name npm allows: its ids are cut to the service's limit.
  const longest = planApp('l'.repeat(214))
  t.equal((await runCliInProcess(['new-app', longest.name, '--dir', appsDir])).code, 0)
  const app = await build(t, { env: { REAKTOR_APPS_DIR: appsDir, REAKTOR_SETTING_MY_APP_GREETING: 'Good morning', ...ADMIN_ENV } })
  const call = await loggedIn(app)

  const listed = await call('GET', '/api/v1/polling')
  t.same(listed.body.pollingReaktors.map((r: { reaktorDefinitionId: string }) => r.reaktorDefinitionId).sort(), ['acme-widgets-poll', longest.pollingId, 'my-app-poll'])
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

  const passed = await runCli(['test', dir, '--', TAP], { timeoutMs: deadline(60_000) })
  t.equal(passed.code, 0, passed.stderr)
  t.match(passed.stdout, /# pass 3\n/)
  t.match(passed.stdout, /# fail 0\n/)

  // The aktor changed without its test: the test fails, and so does the command.
  const entry = path.join(dir, 'index.js')
  await fs.writeFile(entry, (await fs.readFile(entry, 'utf8')).replace('`${String(settings.greeting)}, ${name}!`', '`Bye, ${name}`'))
  const failed = await runCli(['test', dir, '--', TAP], { timeoutMs: deadline(60_000) })
  t.equal(failed.code, 1, 'exit 1: a test failed')
  t.match(failed.stdout, /not ok \d+ - hello greets with the greeting setting/)
  t.match(failed.stdout, /# fail 1\n/)

  const notApp = await runCliInProcess(['test', appsDir])
  t.equal(notApp.code, 2)
  t.match(notApp.stderr, /is not a reaktor app folder \(no package\.json\)/)
  const missing = await runCliInProcess(['test', path.join(appsDir, 'nowhere')])
  t.equal(missing.code, 3, 'a folder that does not exist: not found')
  t.match(missing.stderr, /nowhere does not exist/)
})


t.test('the ids stay within the service\'s limit whatever the length of the name', async (t) => {
  for (const name of ['l'.repeat(214), `@${'s'.repeat(100)}/${'n'.repeat(113)}`, `${'a'.repeat(193)}-${'b'.repeat(20)}`]) {
    const plan = planApp(name)
    for (const id of [plan.pollingId, plan.aktorId]) {
      t.ok(id.length <= MAX_REAKTOR_ID_LENGTH, `${id.length} characters`)
      t.notMatch(id, /--/, 'no doubled separator where the name was cut')
    }
    t.not(plan.pollingId, plan.aktorId)
  }
})

t.test('a write that fails partway leaves nothing, and the same command then succeeds', async (t) => {
  const appsDir = await tempDir(t)
  // A file size limit of one block: the first file larger than that fails with EFBIG.
  const child = spawn('sh', ['-c', 'ulimit -f 1 && exec "$0" "$@"', process.execPath, path.join(ROOT, 'bin', 'reaktor.js'), 'new-app', 'half', '--ui', '--dir', appsDir], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (s: string) => { stderr += s })
  const code = await new Promise((resolve) => child.on('close', resolve))
  t.equal(code, 1, stderr)
  t.match(stderr, /could not write the app to .*half: EFBIG.*; nothing was written/)
  t.same(await fs.readdir(appsDir), [], 'no half app, and no staging folder left behind')

  t.equal((await runCliInProcess(['new-app', 'half', '--ui', '--dir', appsDir])).code, 0, 'the retry is not blocked')
  t.same(await filesUnder(path.join(appsDir, 'half')), [...APP_FILES, ...UI_FILES].sort())
  t.same(await fs.readdir(appsDir), ['half'])
})

t.test('a name or an id another app of the folder has is refused before anything is written', async (t) => {
  const appsDir = await tempDir(t)
  const other = path.join(appsDir, 'other')
  await fs.mkdir(other)
  await fs.writeFile(path.join(other, 'package.json'), JSON.stringify({ name: 'other', version: '1.0.0' }))
  await fs.mkdir(path.join(other, 'lib'))
  await fs.writeFile(path.join(other, 'lib', 'hello.js'), "export const hello = { reaktorDefinitionId: 'my-app-hello' }\n")
  const clash = await runCliInProcess(['new-app', 'my-app', '--dir', appsDir])
  t.equal(clash.code, 1)
  t.match(clash.stderr, /the reaktor id my-app-hello of my-app is already used in .*other\/lib\/hello\.js: .*choose another name; nothing was written/)

  const renamed = path.join(appsDir, 'renamed')
  await fs.mkdir(renamed)
  await fs.writeFile(path.join(renamed, 'package.json'), JSON.stringify({ name: 'widgets', version: '2.0.0' }))
  const taken = await runCliInProcess(['new-app', 'widgets', '--dir', appsDir])
  t.equal(taken.code, 1)
  t.match(taken.stderr, /the package name widgets is taken by the app in .*renamed: .*choose another name/)
  t.same((await fs.readdir(appsDir)).sort(), ['other', 'renamed'], 'nothing was written')

  // Dot-folders and node_modules are no apps of the service, and an app's dependencies and UI
  // register nothing: what they hold clashes with nothing.
  await fs.mkdir(path.join(appsDir, '.old', 'x'), { recursive: true })
  await fs.writeFile(path.join(appsDir, '.old', 'package.json'), JSON.stringify({ name: 'fresh', version: '1.0.0' }))
  for (const folder of ['node_modules/dep', 'public']) {
    await fs.mkdir(path.join(renamed, folder), { recursive: true })
    await fs.writeFile(path.join(renamed, folder, 'index.js'), "fetch('/api/v1/aktor/' + 'fresh-hello')\nconst id = 'fresh-poll'\n")
  }
  const fresh = await runCliInProcess(['new-app', 'fresh', '--dir', appsDir])
  t.equal(fresh.code, 0, fresh.stderr)
})

t.test('--dir: a file, or a folder whose parent is missing, is refused naming it; another folder than the service\'s is said', async (t) => {
  const root = await tempDir(t)
  const file = path.join(root, 'a-file')
  await fs.writeFile(file, '')
  const notFolder = await runCliInProcess(['new-app', 'x', '--dir', file])
  t.equal(notFolder.code, 1)
  t.match(notFolder.stderr, `the apps folder ${file} exists and is not a folder`)
  const deep = path.join(root, 'no', 'such', 'apps')
  const noParent = await runCliInProcess(['new-app', 'x', '--dir', deep])
  t.equal(noParent.code, 1)
  t.match(noParent.stderr, `${path.dirname(deep)} does not exist`)
  t.same(await fs.readdir(root), ['a-file'], 'no chain of folders created')

  const fresh = path.join(root, 'fresh apps')
  const res = await runCliInProcess(['new-app', 'x', '--dir', fresh], { env: { REAKTOR_APPS_DIR: path.join(root, 'served') } })
  t.equal(res.code, 0, res.stderr)
  t.match(res.stdout, `the apps folder ${fresh} was created`)
  t.match(res.stdout, `start it with REAKTOR_APPS_DIR='${fresh}' to load this app`)
  t.match(res.stdout, `then run its tests: npx reaktor test '${path.join(fresh, 'x')}'`, 'a path with a space is quoted for the shell')
  const same = await runCliInProcess(['new-app', 'y', '--dir', fresh], { env: { REAKTOR_APPS_DIR: fresh } })
  t.notMatch(same.stdout, /REAKTOR_APPS_DIR/, 'nothing to say when it is the service\'s folder')
})

t.test('npm test of a new app: a relative launcher inside the checkout, a quoted absolute one outside', async (t) => {
  const root = '/tmp/h/rs copy'
  t.same(npmTestScript(path.join(root, 'reaktor-apps', 'my-app'), root), { script: 'node ../../bin/reaktor.js test . --', tiedTo: undefined })
  t.same(npmTestScript('/srv/apps/my-app', root), { script: "node '/tmp/h/rs copy/bin/reaktor.js' test . --", tiedTo: root })
})

t.test('reaktor test finds TypeScript tests, passes node options on, and fails when there is nothing to run', async (t) => {
  const appsDir = await tempDir(t)
  t.equal((await runCliInProcess(['new-app', 'typed', '--dir', appsDir])).code, 0)
  const dir = path.join(appsDir, 'typed')
  await fs.writeFile(path.join(dir, 'greeting.test.ts'), "import { test } from 'node:test'\nconst n: number = 1\ntest('typed test', () => { if (n !== 1) throw new Error('no') })\n")
  await fs.mkdir(path.join(dir, 'node_modules', 'dep', 'test'), { recursive: true })
  await fs.writeFile(path.join(dir, 'node_modules', 'dep', 'test', 'x.test.js'), "throw new Error('a dependency\\'s test ran')\n")

  const picked = await runCli(['test', dir, '--', TAP, '--test-name-pattern=typed|hello greets'], { timeoutMs: deadline(60_000) })
  t.equal(picked.code, 0, picked.stderr)
  t.match(picked.stdout, /ok \d+ - typed test\n/)
  // Node 20 lists a test the pattern leaves out as skipped, Node 24 not at all: either way it does not pass.
  t.notMatch(picked.stdout, /^\s*ok \d+ - the poller finds no work[^#\n]*$/m, 'the poller test is left out')
  t.match(picked.stdout, /ok \d+ - hello greets with the greeting setting\n/)
  t.match(picked.stdout, /# fail 0\n/)

  // npm test in the app, with node's options after --, as the app's README would show.
  const npm = spawn('npm', ['test', '--silent', '--', TAP, '--test-name-pattern=typed'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  npm.stdout.setEncoding('utf8').on('data', (s: string) => { out += s })
  npm.stderr.setEncoding('utf8').on('data', (s: string) => { out += s })
  t.equal(await new Promise((resolve) => npm.on('close', resolve)), 0, out)
  t.match(out, /ok \d+ - typed test\n/)
  t.notMatch(out, /^\s*ok \d+ - hello greets[^#\n]*$/m, 'only the test the pattern names')
  t.match(out, /# fail 0\n/)

  for (const file of ['greeting.test.ts', 'test/app.test.js']) await fs.rm(path.join(dir, file))
  const none = await runCliInProcess(['test', dir])
  t.equal(none.code, 1, 'no test found is no success')
  t.match(none.stderr, `no test files in ${dir}`)
})

t.test('interrupting reaktor test ends node --test and the test processes, and says so', async (t) => {
  const appsDir = await tempDir(t)
  t.equal((await runCliInProcess(['new-app', 'hangs', '--dir', appsDir])).code, 0)
  const dir = path.join(appsDir, 'hangs')
  const pidFile = path.join(dir, 'pid')
  await fs.writeFile(path.join(dir, 'test', 'app.test.js'), `import { writeFileSync } from 'node:fs'\nimport { test } from 'node:test'\ntest('never ends', async () => {\n  writeFileSync(${JSON.stringify(pidFile)}, String(process.pid))\n  await new Promise(() => setInterval(() => {}, 1000))\n})\n`)
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'reaktor.js'), 'test', dir], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (s: string) => { stderr += s })
  child.stdout.resume()
  const closed = new Promise((resolve) => child.on('close', resolve))
  const testPid = Number(await waitFor(async () => await fs.readFile(pidFile, 'utf8').catch(() => undefined), { timeoutMs: deadline(60_000), what: 'the test process to start' }))
  child.kill('SIGTERM')
  t.equal(await closed, 1)
  t.match(stderr, /reaktor: node --test was killed by SIGTERM\n/)
  const alive = (): boolean => { try { process.kill(testPid, 0); return true } catch { return false } }
  t.ok(await waitFor(() => !alive(), { timeoutMs: deadline(10_000), what: 'the test process to end' }), 'no test process left running')
})
