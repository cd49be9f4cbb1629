/**
 * `npm run dev` as an app author runs it, in a process group of its own as a terminal would: an
 * edited app is reloaded in place, its new code answering within a second, while the reaktor the
 * author started runs on; a burst of saves ends in few reloads, the last save answering; an app
 * written in TypeScript loads and reloads; a broken edit is reported as a start reports it and
 * leaves the previous version running, and the fix reloads; a new app restarts the service on the
 * same embedded PostgreSQL, with the process started ahead taking over, and a start that fails
 * leaves the dev loop waiting; what an app starts goes with the service; Ctrl-C ends every process
 * it started. Then, on the same DATA_DIR: an apps folder made after the start, with an app linked
 * into it, is watched; and npm stopped alone (not its process group) ends the dev loop too.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as pause } from 'node:timers/promises'
import { postmasterPid } from '../../src/db/embedded.js'
import type { TestContext } from '../helpers/test-context.js'
import { bound, deadline, waitFor } from '../helpers/timing.js'
import { ROOT } from '../helpers/paths.js'
import { alive, freePort, stopLeftoverPostgres } from '../helpers/server.js'

/** The processes other than this one whose `/proc/PID/<file>` (NUL-separated fields) `matches`. */
async function processesWhere (file: 'environ' | 'cmdline', matches: (fields: string[]) => boolean): Promise<number[]> {
  const pids = (await fs.readdir('/proc')).filter((name) => /^\d+$/.test(name))
  const found = await Promise.all(pids.map(async (pid) => {
    const fields = (await fs.readFile(`/proc/${pid}/${file}`, 'utf8').catch(() => '')).split('\0')
    return matches(fields) ? Number(pid) : undefined
  }))
  return found.filter((pid) => pid !== undefined && pid !== process.pid) as number[]
}

/** The processes whose environment holds `entry` (NAME=value): whatever the dev loop started, spares included. */
async function processesWith (entry: string): Promise<number[]> {
  return await processesWhere('environ', (environ) => environ.includes(entry))
}

/** The `sleep` processes with this (unique) argument: what the app below starts each time it loads. */
async function sleepers (seconds: string): Promise<number[]> {
  return await processesWhere('cmdline', (args) => path.basename(args[0]) === 'sleep' && args[1] === seconds)
}

const SLEEP_SECONDS = String(1_000_000 + Math.floor(Math.random() * 1_000_000))
const JS_PACKAGE = { name: 'js-app', version: '1.0.0', type: 'module', main: 'index.js' }
/**
 * An app that, as some do, starts a process of its own when it loads; with a polling reaktor that
 * does not start by itself, and an aktor. Its ids start with `prefix`.
 */
const appModule = (prefix: string, answer: string): string => `import { spawn } from 'node:child_process'
spawn('sleep', ['${SLEEP_SECONDS}'], { stdio: 'ignore' })
export const pollingReaktors = [{ reaktorDefinitionId: '${prefix}-poll', interval: '3s', createReaktor: () => async () => false }]
export const reaktors = [{ reaktorDefinitionId: '${prefix}-answer', createReaktor: () => async () => ${JSON.stringify(answer)} }]
`
const jsModule = (answer: string): string => appModule('js', answer)
/** A syntax error in a module that imports something: tsx's own lexer reads such a module first. */
const BROKEN_LINE = "  { reaktorDefinitionId: 'js-answer', createReaktor: () => async () => String('broken' }"
const BROKEN_MODULE = `import { spawn } from 'node:child_process'\nexport const reaktors = [\n${BROKEN_LINE}\n]\nexport { spawn }\n`
/** What the service says of BROKEN_MODULE, as npm start says it: file, line, column, reason, then the line with a caret under the place. */
const BROKEN_COLUMN = BROKEN_LINE.indexOf("'broken'") + 1
const BROKEN_MESSAGE = new RegExp('ERROR: app js-app@1\\.0\\.0 was not reloaded; it keeps running the version it ran: app js-app@1\\.0\\.0: entry module "index\\.js" failed to import: ' +
  `SyntaxError at index\\.js:3:${BROKEN_COLUMN}: missing \\) after argument list\\n {4}${BROKEN_LINE.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\n {${4 + BROKEN_COLUMN - 1}}\\^{8}\\n`)
const linkedModule = (answer: string): string =>
  `export const reaktors = [{ reaktorDefinitionId: 'linked-answer', createReaktor: () => async () => ${JSON.stringify(answer)} }]\n`

const TS_PACKAGE = { name: 'ts-app', version: '1.0.0', type: 'module', main: 'index.ts' }
const tsModule = (greeting: string): string => `import { defineApp, defineReaktor, type Aktor } from 'reaktor-service/sdk'

interface Greeting { name: string }

const greet: Aktor<Greeting, string> = async (input) => \`${greeting} \${input.name}\`

export default defineApp({
  reaktors: [defineReaktor<Greeting, string>({ reaktorDefinitionId: 'ts-greet', createReaktor: () => greet })]
})
`

// Open to the postgres user, so that as root the database stays in DATA_DIR and goes with it.
const work = await fs.mkdtemp(path.join(os.tmpdir(), 'reaktor-dev-'))
await fs.chmod(work, 0o755)
const dataDir = path.join(work, 'data')
t.teardown(async () => {
  // A supervisor killed outright leaves its database running: stopped here, then the folder goes.
  await stopLeftoverPostgres(path.join(dataDir, 'postgres'))
  await fs.rm(work, { recursive: true, force: true })
})

interface Dev {
  pid: number
  output: () => string
  running: () => boolean
  exited: Promise<{ code: number | null, signal: NodeJS.Signals | null }>
  /** Whether `pattern` is in the output after `from`; throws once npm run dev has exited. */
  seen: (pattern: RegExp, from?: number) => boolean
  url: string
  /** An aktor's answer, or undefined while the service restarts (refused connections, 404 on a half-started app). */
  answer: (id: string, input?: unknown) => Promise<unknown>
  /** A request to the API as the admin, without a body. */
  api: (method: 'GET' | 'POST', path: string) => Promise<{ status: number, body: any }>
}

type DevTest = TestContext & { equal: (a: unknown, b: unknown, message: string) => void }

function spawnDev (t: TestContext, appsDir: string, port: number): Omit<Dev, 'answer' | 'api' | 'url'> {
  let output = ''
  const dev = spawn('npm', ['run', 'dev'], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: '', DATA_DIR: dataDir, REAKTOR_APPS_DIR: appsDir, PORT: String(port), LOG_LEVEL: 'debug', LOG_FORMAT: '', CONSOLE: 'false' },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group, as a terminal's foreground job: Ctrl-C signals the whole group.
    detached: true
  })
  dev.stdout.on('data', (d: Buffer) => { output += d.toString() })
  dev.stderr.on('data', (d: Buffer) => { output += d.toString() })
  const exited = new Promise<{ code: number | null, signal: NodeJS.Signals | null }>((resolve) => dev.on('exit', (code, signal) => resolve({ code, signal })))
  const running = (): boolean => dev.exitCode === null && dev.signalCode === null
  t.teardown(async () => {
    if (running()) process.kill(-dev.pid!, 'SIGKILL')
    // What a failed test leaves: the supervisor, the service and the app's processes, whatever their group.
    for (const pid of [...await processesWith(`DATA_DIR=${dataDir}`), ...await sleepers(SLEEP_SECONDS)]) {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {
        // Ended meanwhile.
      }
    }
  })
  const seen = (pattern: RegExp, from = 0): boolean => {
    if (!running()) throw new Error(`npm run dev exited: ${output}`)
    return pattern.test(output.slice(from))
  }
  return { pid: dev.pid!, output: () => output, running, exited, seen }
}

async function startDev (t: DevTest, appsDir: string): Promise<Dev> {
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  const dev = spawnDev(t, appsDir, port)
  const { seen } = dev
  await waitFor(async () => seen(/ready in \d+\.\d s/) && (await fetch(`${url}/healthz`).catch(() => undefined))?.status === 200,
    { timeoutMs: deadline(120_000), what: 'npm run dev to serve' })

  const password = (await fs.readFile(path.join(dataDir, 'initial-admin-password'), 'utf8')).trim()
  const login = await fetch(`${url}/api/v1/auth/login`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password })
  })
  t.equal(login.status, 200, 'the admin logs in')
  const { token } = await login.json() as { token: string }
  const answer = async (id: string, input: unknown = {}): Promise<unknown> => {
    const res = await fetch(`${url}/api/v1/aktor/${id}`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-service-token': token }, body: JSON.stringify(input)
    }).catch(() => undefined)
    return res?.status === 200 ? await res.json() : undefined
  }
  const api = async (method: 'GET' | 'POST', path: string): Promise<{ status: number, body: any }> => {
    const res = await fetch(`${url}${path}`, { method, headers: { 'x-service-token': token } })
    return { status: res.status, body: await res.json() }
  }
  return { ...dev, url, answer, api }
}

/** The service processes started ahead that wait to start, as the supervisor announces them (LOG_LEVEL=debug). */
function waitingToStart (output: string): number[] {
  const tookOver = new Set([...output.matchAll(/service process (\d+) takes over/g)].map((m) => Number(m[1])))
  return [...output.matchAll(/service process (\d+) has imported its modules; it waits to start/g)].map((m) => Number(m[1])).filter((pid) => !tookOver.has(pid))
}

/** The service processes the supervisor keeps started ahead. */
const AHEAD = 2

const seconds = (ms: number): string => `${(ms / 1000).toFixed(2)} s`

t.test('npm run dev: Ctrl-C while the database starts stops, and is no failure', async (t) => {
  const dev = spawnDev(t, path.join(work, 'apps'), await freePort())
  await waitFor(() => dev.seen(/initialising embedded PostgreSQL/), { timeoutMs: deadline(60_000), what: 'the database to be initialised' })
  process.kill(-dev.pid, 'SIGINT')
  const end = await dev.exited
  t.ok(end.signal === 'SIGINT' || end.code === 130 || end.code === 0, `Ctrl-C ends npm run dev (${JSON.stringify(end)})`)
  t.match(dev.output(), /INFO: stopping\n(.|\n)*INFO: stopped\n/, 'the supervisor says it stopped')
  t.notMatch(dev.output(), /failed to start/, 'not that it failed')
  await waitFor(async () => (await processesWith(`DATA_DIR=${dataDir}`)).length === 0, { timeoutMs: deadline(20_000), what: 'every process of the dev loop to end' })
})

t.test('npm run dev: reloads an edited app in place, its started reaktor running on; a broken edit keeps the previous version; a new app restarts the service with the process started ahead; Ctrl-C ends it all', async (t) => {
  const appsDir = path.join(work, 'apps')
  const jsDir = path.join(appsDir, 'js-app')
  const tsDir = path.join(appsDir, 'ts-app')
  await fs.mkdir(path.join(jsDir, 'public'), { recursive: true })
  await fs.mkdir(tsDir, { recursive: true })
  await fs.writeFile(path.join(jsDir, 'package.json'), JSON.stringify(JS_PACKAGE))
  await fs.writeFile(path.join(jsDir, 'index.js'), jsModule('one'))
  await fs.writeFile(path.join(jsDir, 'public', 'index.html'), '<p>one</p>')
  await fs.writeFile(path.join(tsDir, 'package.json'), JSON.stringify(TS_PACKAGE))
  await fs.writeFile(path.join(tsDir, 'index.ts'), tsModule('hello'))

  const dev = await startDev(t, appsDir)
  const { seen, answer, api, output } = dev
  const password = (await fs.readFile(path.join(dataDir, 'initial-admin-password'), 'utf8')).trim()
  t.ok(output().includes(`first run: created user "admin" with password ${password}`), 'the first-run admin password is printed, as npm start prints it')
  t.match(output(), /INFO.*: embedded PostgreSQL started/, 'pretty log lines, not JSON')
  t.notMatch(output(), /^\{"level"/m)
  t.equal(await answer('js-answer'), 'one', 'the JavaScript app answers')
  t.equal(await answer('ts-greet', { name: 'dev' }), 'hello dev', 'the TypeScript app (main: index.ts) loads and answers')

  const clusterDir = await fs.realpath(path.join(dataDir, 'postgres'))
  const database = await postmasterPid(clusterDir)
  t.ok(database !== undefined && alive(database), 'the embedded PostgreSQL runs')

  // "Start it, then edit": the author starts a reaktor that does not start by itself.
  t.equal((await api('POST', '/api/v1/polling/js-poll/start')).status, 200)
  const owner = await waitFor(async () => (await api('GET', '/api/v1/polling/js-poll/status')).body.owner as string | null, { what: 'the started reaktor to have an owner' })
  const reloadTimes: number[] = []
  /** Saves `content` as `file` of an app and waits for `expected` from `ask` (within the promise of docs/development.md), and for the supervisor's line. */
  const saveAndReload = async (file: string, content: string, ask: () => Promise<unknown>, expected: unknown): Promise<string> => {
    const from = output().length
    const savedAt = Date.now()
    await fs.writeFile(file, content)
    await waitFor(async () => await ask() === expected, { timeoutMs: bound(1000, 'notice'), intervalMs: 25, what: `the edited app to answer ${String(expected)}` })
    reloadTimes.push(Date.now() - savedAt)
    await waitFor(() => seen(/INFO: reloaded in place in \d+\.\d s: /, from), { what: 'the supervisor to report the reload' })
    return output().slice(from)
  }
  for (let n = 1; n <= 10; n++) {
    const since = await saveAndReload(path.join(jsDir, 'index.js'), jsModule(`save ${n}`), async () => await answer('js-answer'), `save ${n}`)
    t.match(since, /INFO: reloaded in place in \d+\.\d s: .*js-app\/index\.js changed/, `save ${n}: one line names the file and the time`)
    t.notMatch(since, /reloading: |takes over/, 'and the service is not restarted')
    t.match((await api('GET', '/api/v1/polling/js-poll/status')).body, { state: 'running', owner }, 'the started reaktor runs on, on its owner')
  }
  t.comment(`reload in place, from the save to the first answer of the new code: ${reloadTimes.map(seconds).join(', ')}`)
  await saveAndReload(path.join(tsDir, 'index.ts'), tsModule('hi'), async () => await answer('ts-greet', { name: 'dev' }), 'hi dev')
  t.pass('a TypeScript app reloads in place too')
  t.equal(await postmasterPid(clusterDir), database, 'the same PostgreSQL server')
  t.equal(output().match(/service process \d+ takes over/g)?.length, 1, 'and the same service process, all along')

  let from = output().length
  await fs.writeFile(path.join(jsDir, 'index.js'), BROKEN_MODULE)
  await waitFor(() => seen(/WARN: not reloaded: .*js-app\/index\.js changed, but js-app@1\.0\.0 did not load \(the error is above\); it keeps running the version it ran/, from),
    { timeoutMs: deadline(20_000), what: 'the broken edit to be reported' })
  t.match(output().slice(from), BROKEN_MESSAGE, 'the error, as npm start says it: file, line, column, reason, the line and a caret')
  t.equal(await answer('js-answer'), 'save 10', 'the previous version keeps answering')
  t.match((await api('GET', '/api/v1/polling/js-poll/status')).body, { state: 'running', owner })
  await saveAndReload(path.join(jsDir, 'index.js'), jsModule('fixed'), async () => await answer('js-answer'), 'fixed')
  t.pass('the fix reloads')

  // A build in watch mode: the source saved, then the module it compiles to, a moment later.
  // Not index.ts: tsx would load it for main: index.js.
  await fs.writeFile(path.join(jsDir, 'source.ts'), '// the source of index.js\n')
  // The pace of a compiler's write after the save, not a wait for anything.
  await pause(460)
  await fs.writeFile(path.join(jsDir, 'index.js'), jsModule('compiled'))
  const compiledAt = Date.now()
  await waitFor(async () => await answer('js-answer') === 'compiled', { timeoutMs: deadline(30_000), intervalMs: 25, what: 'the compiled module to answer' })
  t.comment(`a source saved, then its compiled module 460 ms later: the compiled module answered ${seconds(Date.now() - compiledAt)} after its write`)

  // Saves in quick succession (an editor saving on each keystroke, a build writing file after
  // file): they reload together, and the last one answers within the promise.
  from = output().length
  const saves = 15
  for (let n = 1; n <= saves; n++) {
    await fs.writeFile(path.join(jsDir, 'index.js'), jsModule(`burst ${n}`))
    // The pace of the saves, not a wait for anything.
    if (n < saves) await pause(50)
  }
  const lastSaveAt = Date.now()
  await waitFor(async () => await answer('js-answer') === `burst ${saves}`, { timeoutMs: bound(1000, 'notice'), intervalMs: 25, what: 'the last save of the burst to answer' })
  const afterBurst = Date.now() - lastSaveAt
  await waitFor(() => seen(/reloaded in place in /, from), { what: 'the supervisor to report the reload' })
  const burstReloads = output().slice(from).match(/reloaded in place in /g)?.length ?? 0
  t.comment(`${saves} saves 50 ms apart: ${burstReloads} reloads; the last save answered ${seconds(afterBurst)} after it`)
  t.ok(burstReloads < saves / 2, `a burst of saves is not a reload for each (${burstReloads})`)

  // A change to public/ alone reloads nothing (the service serves those files fresh): in one burst
  // with a module edit, the module is what the reload names.
  from = output().length
  await fs.writeFile(path.join(jsDir, 'public', 'index.html'), '<p>two</p>')
  await fs.writeFile(path.join(jsDir, 'index.js'), jsModule('five'))
  await waitFor(async () => await answer('js-answer') === 'five', { timeoutMs: deadline(20_000), what: 'the app to answer five' })
  t.notMatch(output().slice(from), /(reloading|reloaded in place in \d+\.\d s): .*public/, 'a public/ file is no reason to reload')
  t.match((await api('GET', '/api/v1/polling/js-poll/status')).body, { state: 'running', owner }, 'after all of it, the started reaktor still runs')

  // The app's top-level code ran once per load of its module in this service: each started a sleep.
  const jsLoads = 1 + (output().match(/reloaded in place in \d+\.\d s: .*js-app\//g)?.length ?? 0)
  await waitFor(async () => (await sleepers(SLEEP_SECONDS)).length === jsLoads, { timeoutMs: deadline(10_000), what: `${jsLoads} processes started by the app's loads` })
  t.pass(`what the app's top-level code started on each load (${jsLoads} sleeps) runs until the service restarts`)

  // A new app folder restarts the service; one that does not start leaves the dev loop waiting.
  const ahead = await waitFor(() => { const pids = waitingToStart(output()); return pids.length === AHEAD ? pids[0] : undefined }, { timeoutMs: deadline(30_000), what: 'the next service processes' })
  from = output().length
  const newDir = path.join(appsDir, 'new-app')
  await fs.mkdir(newDir)
  await fs.writeFile(path.join(newDir, 'index.js'), BROKEN_MODULE.replaceAll('js-', 'new-'))
  await fs.writeFile(path.join(newDir, 'package.json'), JSON.stringify({ ...JS_PACKAGE, name: 'new-app' }))
  await waitFor(() => seen(/the service did not start; waiting for a change to reload/, from), { timeoutMs: deadline(30_000), what: 'the broken start to be reported' })
  t.match(output().slice(from), /reloading: .*new-app.* changed/, 'a new app folder restarts the service')
  t.match(output().slice(from), new RegExp(`service process ${ahead} takes over`), `the process started ahead (${ahead}) takes over`)
  t.match(output().slice(from), /failed to start: app new-app@1\.0\.0: entry module "index\.js" failed to import: SyntaxError at index\.js:\d+:\d+: missing \) after argument list\n.*String\('broken' }\n +\^+\n/,
    'a start says why it did not, with the same file, line, reason and caret')
  t.ok(dev.running(), 'the dev loop keeps running after a broken start')
  t.equal(await postmasterPid(clusterDir), database, 'and so does its database')
  await waitFor(() => waitingToStart(output()).length === AHEAD, { timeoutMs: deadline(30_000), what: 'the next service processes' })
  from = output().length
  const fixedAt = Date.now()
  await fs.writeFile(path.join(newDir, 'index.js'), appModule('new', 'new'))
  await waitFor(async () => await answer('new-answer') === 'new', { timeoutMs: deadline(30_000), intervalMs: 25, what: 'the fixed new app to answer' })
  t.comment(`a restart, from the save to the first answer: ${seconds(Date.now() - fixedAt)}`)
  await waitFor(() => seen(/ready in \d+\.\d s/, from), { what: 'the supervisor to report the restart' })
  t.match(output().slice(from), /reloading: .*new-app\/index\.js changed/, 'the service not serving, an app change restarts it')
  t.equal(await answer('js-answer'), 'five', 'and every app is loaded again')
  t.equal(await postmasterPid(clusterDir), database)

  // Each app's load in the new service started one sleep; the restarts ended those of the service before.
  await waitFor(async () => (await sleepers(SLEEP_SECONDS)).length === 2, { timeoutMs: deadline(15_000), what: "only the running service's app processes to be left" })
  t.pass("the processes an app started went with the service they ran in; the running service's remain")

  process.kill(-dev.pid, 'SIGINT')
  // npm ends itself with the signal it was sent once its script has exited (a shell sees 130).
  const end = await dev.exited
  t.ok(end.signal === 'SIGINT' || end.code === 130 || end.code === 0, `Ctrl-C ends npm run dev (${JSON.stringify(end)})`)
  t.match(output(), /INFO: stopping\n(.|\n)*INFO: stopped\n/, 'the supervisor stopped the service and the database, gracefully')
  await waitFor(async () => !alive(database!) && (await processesWith(`DATA_DIR=${dataDir}`)).length === 0 && (await sleepers(SLEEP_SECONDS)).length === 0,
    { timeoutMs: deadline(15_000), what: 'the database, every process of the dev loop and those of its app to end' })
  t.equal(await postmasterPid(clusterDir), undefined, 'no PostgreSQL is left in DATA_DIR')
})

t.test('npm run dev: an apps folder made after the start, and an app linked into it, are watched; npm stopped alone ends the dev loop', async (t) => {
  const appsDir = path.join(work, 'later-apps')
  const linkedDir = path.join(work, 'elsewhere', 'linked-app')
  await fs.mkdir(linkedDir, { recursive: true })
  await fs.writeFile(path.join(linkedDir, 'package.json'), JSON.stringify({ name: 'linked-app', version: '1.0.0', type: 'module', main: 'index.js' }))
  await fs.writeFile(path.join(linkedDir, 'index.js'), linkedModule('linked one'))

  const dev = await startDev(t, appsDir)
  const { answer, output } = dev
  t.match(output(), /REAKTOR_APPS_DIR does not exist: watched for it to appear/, 'a missing apps folder is said to be watched for')

  await fs.mkdir(appsDir)
  await fs.symlink(linkedDir, path.join(appsDir, 'linked-app'))
  await waitFor(async () => await answer('linked-answer') === 'linked one', { timeoutMs: deadline(30_000), what: 'the app linked into the new apps folder to answer' })
  t.pass('the apps folder made after the start is watched, and an app linked into it is loaded')
  await fs.writeFile(path.join(linkedDir, 'index.js'), linkedModule('linked two'))
  await waitFor(async () => await answer('linked-answer') === 'linked two', { timeoutMs: deadline(30_000), what: 'the edited linked app to answer' })
  await waitFor(() => dev.seen(/reloaded in place in \d+\.\d s: .*later-apps\/linked-app\/index\.js changed/), { what: 'the supervisor to report the reload' })
  t.pass('an edit in the linked folder reloads the app in place, named by the link')

  const clusterDir = await fs.realpath(path.join(dataDir, 'postgres'))
  const database = await postmasterPid(clusterDir)
  t.ok(database !== undefined && alive(database), 'the embedded PostgreSQL runs')
  // As an IDE's stop button, `timeout` or a process manager does: npm alone, not its process group.
  process.kill(dev.pid, 'SIGTERM')
  await dev.exited
  await waitFor(async () => !alive(database!) && (await processesWith(`DATA_DIR=${dataDir}`)).length === 0,
    { timeoutMs: deadline(20_000), what: 'the supervisor, the service and the database to end' })
  t.match(output(), /INFO: stopped\n/, 'the supervisor saw npm end, and stopped the service and the database, gracefully')
  t.equal(await postmasterPid(clusterDir), undefined, 'no PostgreSQL is left in DATA_DIR')
})
