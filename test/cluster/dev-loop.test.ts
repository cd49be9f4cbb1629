/**
 * `npm run dev` as an app author runs it, in a process group of its own as a terminal would: the
 * service answers with an app's new code soon after an edit, on the same embedded PostgreSQL; an
 * app written in TypeScript loads; a broken edit leaves the dev loop waiting, and the fix brings
 * the service back; Ctrl-C ends every process it started.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { postmasterPid } from '../../src/db/embedded.js'
import { waitFor } from '../helpers/context.js'
import { ROOT } from '../helpers/paths.js'
import { alive, freePort, stopLeftoverPostgres } from '../helpers/server.js'

/** The processes whose environment holds `entry` (NAME=value): whatever the dev loop started, spares included. */
async function processesWith (entry: string): Promise<number[]> {
  const pids = (await fs.readdir('/proc')).filter((name) => /^\d+$/.test(name))
  const found = await Promise.all(pids.map(async (pid) => {
    const environ = await fs.readFile(`/proc/${pid}/environ`, 'utf8').catch(() => '')
    return environ.split('\0').includes(entry) ? Number(pid) : undefined
  }))
  return found.filter((pid) => pid !== undefined && pid !== process.pid) as number[]
}

const JS_PACKAGE = { name: 'js-app', version: '1.0.0', type: 'module', main: 'index.js' }
const jsModule = (answer: string): string =>
  `export const reaktors = [{ reaktorDefinitionId: 'js-answer', createReaktor: () => async () => ${JSON.stringify(answer)} }]\n`

const TS_PACKAGE = { name: 'ts-app', version: '1.0.0', type: 'module', main: 'index.ts' }
const TS_MODULE = `import { defineApp, defineReaktor, type Aktor } from 'reaktor-service/sdk'

interface Greeting { name: string }

const greet: Aktor<Greeting, string> = async (input) => \`hello \${input.name}\`

export default defineApp({
  reaktors: [defineReaktor<Greeting, string>({ reaktorDefinitionId: 'ts-greet', createReaktor: () => greet })]
})
`

t.test('npm run dev: reloads an edited app on the same database, survives a broken edit, and Ctrl-C ends it all', async (t) => {
  // Open to the postgres user, so that as root the database stays in DATA_DIR and goes with it.
  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'reaktor-dev-'))
  await fs.chmod(work, 0o755)
  const dataDir = path.join(work, 'data')
  const appsDir = path.join(work, 'apps')
  const jsDir = path.join(appsDir, 'js-app')
  const tsDir = path.join(appsDir, 'ts-app')
  await fs.mkdir(path.join(jsDir, 'public'), { recursive: true })
  await fs.mkdir(tsDir, { recursive: true })
  await fs.writeFile(path.join(jsDir, 'package.json'), JSON.stringify(JS_PACKAGE))
  await fs.writeFile(path.join(jsDir, 'index.js'), jsModule('one'))
  await fs.writeFile(path.join(jsDir, 'public', 'index.html'), '<p>one</p>')
  await fs.writeFile(path.join(tsDir, 'package.json'), JSON.stringify(TS_PACKAGE))
  await fs.writeFile(path.join(tsDir, 'index.ts'), TS_MODULE)
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`

  let output = ''
  const dev = spawn('npm', ['run', 'dev'], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: '', DATA_DIR: dataDir, REAKTOR_APPS_DIR: appsDir, PORT: String(port), LOG_LEVEL: 'debug', LOG_FORMAT: '' },
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
    // A supervisor killed outright leaves its database running: stopped here, then the folder goes.
    await stopLeftoverPostgres(path.join(dataDir, 'postgres'))
    await fs.rm(work, { recursive: true, force: true })
  })
  const seen = (pattern: RegExp, from = 0): boolean => {
    if (!running()) throw new Error(`npm run dev exited: ${output}`)
    return pattern.test(output.slice(from))
  }

  await waitFor(async () => seen(/ready in \d+\.\d s/) && (await fetch(`${url}/healthz`).catch(() => undefined))?.status === 200,
    { timeoutMs: 120_000, what: 'npm run dev to serve' })
  const password = (await fs.readFile(path.join(dataDir, 'initial-admin-password'), 'utf8')).trim()
  t.ok(output.includes(`first run: created user "admin" with password ${password}`), 'the first-run admin password is printed, as npm start prints it')
  t.match(output, /INFO.*: embedded PostgreSQL started/, 'pretty log lines, not JSON')
  t.notMatch(output, /^\{"level"/m)

  const login = await fetch(`${url}/api/v1/auth/login`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password })
  })
  t.equal(login.status, 200)
  const { token } = await login.json() as { token: string }
  /** An aktor's answer, or undefined while the service restarts (refused connections, 404 on a half-started app). */
  const answer = async (id: string, input: unknown = {}): Promise<unknown> => {
    const res = await fetch(`${url}/api/v1/aktor/${id}`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-service-token': token }, body: JSON.stringify(input)
    }).catch(() => undefined)
    return res?.status === 200 ? await res.json() : undefined
  }
  t.equal(await answer('js-answer'), 'one', 'the JavaScript app answers')
  t.equal(await answer('ts-greet', { name: 'dev' }), 'hello dev', 'the TypeScript app (main: index.ts) loads and answers')

  const clusterDir = await fs.realpath(path.join(dataDir, 'postgres'))
  const database = await postmasterPid(clusterDir)
  t.ok(database !== undefined && alive(database), 'the embedded PostgreSQL runs')

  const reloadTimes: number[] = []
  const prepared = /the next service process has imported its modules/g
  for (const next of ['two', 'three', 'four']) {
    // As between an author's edits: the supervisor has the next service process ready.
    await waitFor(() => seen(prepared) && output.match(prepared)!.length === reloadTimes.length + 1, { timeoutMs: 30_000, what: 'the next service process' })
    const from = output.length
    const editedAt = Date.now()
    await fs.writeFile(path.join(jsDir, 'index.js'), jsModule(next))
    await waitFor(async () => await answer('js-answer') === next, { timeoutMs: 20_000, intervalMs: 25, what: `the edited app to answer ${next}` })
    reloadTimes.push(Date.now() - editedAt)
    await waitFor(() => seen(/ready in \d+\.\d s/, from), { what: 'the supervisor to report the reload' })
    t.match(output.slice(from), /reloading: .*js-app\/index\.js changed/, 'one line names the file that changed')
  }
  t.comment(`reload, from the edit to the first answer of the new code: ${reloadTimes.map((ms) => `${(ms / 1000).toFixed(2)} s`).join(', ')} (target under 2 s)`)
  t.comment(`the supervisor's own measure: ${[...output.matchAll(/ready in (\d+\.\d) s/g)].slice(1).map((m) => `${m[1]} s`).join(', ')}`)
  t.equal(await postmasterPid(clusterDir), database, 'the reloads kept the same PostgreSQL server')
  t.equal(await answer('ts-greet', { name: 'again' }), 'hello again', 'and every app is loaded again')

  // A change to public/ alone restarts nothing (the service serves those files fresh): in one burst
  // with a module edit, the module is what the reload names.
  let from = output.length
  await fs.writeFile(path.join(jsDir, 'public', 'index.html'), '<p>two</p>')
  await fs.writeFile(path.join(jsDir, 'index.js'), jsModule('five'))
  await waitFor(async () => await answer('js-answer') === 'five', { timeoutMs: 20_000, what: 'the app to answer five' })
  t.notMatch(output.slice(from), /reloading: .*public/, 'a public/ file is no reason to reload')

  from = output.length
  await fs.writeFile(path.join(jsDir, 'index.js'), 'export const reaktors = [\n')
  await waitFor(() => seen(/the service did not start; waiting for a change to reload/, from), { timeoutMs: 30_000, what: 'the broken start to be reported' })
  t.match(output.slice(from), /failed to start: app js-app@1\.0\.0: entry module "index\.js" failed to import/, 'the service says why it did not start')
  t.ok(running(), 'the dev loop keeps running after a broken edit')
  t.equal(await postmasterPid(clusterDir), database, 'and so does its database')

  await fs.writeFile(path.join(jsDir, 'index.js'), jsModule('fixed'))
  await waitFor(async () => await answer('js-answer') === 'fixed', { timeoutMs: 30_000, what: 'the fixed app to answer' })
  t.pass('the fix brings the service back')
  t.equal(await postmasterPid(clusterDir), database)

  const services = [...new Set([...output.matchAll(/node: "[^"]*:(\d+)"/g)].map((m) => Number(m[1])))]
  t.ok(services.length >= 5, `every reload ran a new service process (${services.length})`)
  const started = await processesWith(`DATA_DIR=${dataDir}`)
  t.ok(started.length >= 3, `npm, the supervisor, the service and its spare run (${started.length} processes)`)
  process.kill(-dev.pid!, 'SIGINT')
  // npm ends itself with the signal it was sent once its script has exited (a shell sees 130).
  const end = await exited
  t.ok(end.signal === 'SIGINT' || end.code === 130 || end.code === 0, `Ctrl-C ends npm run dev (${JSON.stringify(end)})`)
  t.match(output, /INFO: stopping\n(.|\n)*INFO: stopped\n/, 'the supervisor stopped the service and the database, gracefully')
  await waitFor(async () => !alive(database!) && (await processesWith(`DATA_DIR=${dataDir}`)).length === 0,
    { timeoutMs: 15_000, what: 'the database and every process of the dev loop to end' })
  t.equal(await postmasterPid(clusterDir), undefined, 'no PostgreSQL is left in DATA_DIR')
})
