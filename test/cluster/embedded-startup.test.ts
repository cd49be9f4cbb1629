/**
 * Starting the embedded PostgreSQL: from a checkout inside a 0700 folder (as root, PostgreSQL
 * runs as `postgres`, which cannot enter it), and starts racing each other on one DATA_DIR.
 */
import t, { type Test } from 'tap'
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import pg from 'pg'
import { DEFAULT_EMBEDDED_POSTGRES_DIR } from '../../src/config.js'
import { postgresBinaries, postmasterPid, startEmbeddedPostgres } from '../../src/db/embedded.js'
import { tempDir } from '../helpers/temp-dir.js'
import { waitFor } from '../helpers/timing.js'
import { memoryLogger, silentLogger } from '../helpers/log.js'
import { ROOT } from '../helpers/paths.js'
import { alive, freePort, listeningUrl, startOutcome, startServer, stopLeftoverPostgres, type ServerProcess } from '../helpers/server.js'

const execFileAsync = promisify(execFile)
const asRoot = process.getuid?.() === 0
const PG_PACKAGE = `@embedded-postgres/${os.platform()}-${os.arch()}`

/**
 * A checkout of the service at `dir` as a fresh clone has it: its own copy of the sources, the
 * example apps and the PostgreSQL binaries; the other packages are links to this checkout's.
 */
async function copyCheckout (dir: string): Promise<void> {
  await fs.mkdir(path.join(dir, 'node_modules', path.dirname(PG_PACKAGE)), { recursive: true })
  for (const entry of ['src', 'reaktor-apps', 'package.json', 'tsconfig.json']) {
    await fs.cp(path.join(ROOT, entry), path.join(dir, entry), { recursive: true })
  }
  for (const entry of await fs.readdir(path.join(ROOT, 'node_modules'))) {
    if (entry !== path.dirname(PG_PACKAGE)) await fs.symlink(path.join(ROOT, 'node_modules', entry), path.join(dir, 'node_modules', entry))
  }
  await fs.cp(path.join(ROOT, 'node_modules', PG_PACKAGE), path.join(dir, 'node_modules', PG_PACKAGE), { recursive: true, verbatimSymlinks: true })
}

async function login (url: string, dataDir: string): Promise<number> {
  const password = (await fs.readFile(path.join(dataDir, 'initial-admin-password'), 'utf8')).trim()
  const res = await fetch(`${url}/api/v1/auth/login`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password })
  })
  return res.status
}

/** At teardown: a server a failed test left running in `clusterDir` (SIGKILL of the service leaves it), stopped. */
function stopLeftoverAtTeardown (t: Test, clusterDir: string): void {
  t.teardown(async () => { await stopLeftoverPostgres(clusterDir) })
}

/** SIGTERM, and the server's exit code; the server is SIGKILLed at teardown if the test ends first. */
async function stop (server: ServerProcess): Promise<number | null> {
  server.child.kill('SIGTERM')
  return await server.exited
}

t.test('a checkout inside a 0700 folder starts, serves, and starts again on its data', async (t) => {
  const outer = await tempDir(t, 'reaktor-0700-')
  t.equal((await fs.stat(outer)).mode & 0o777, 0o700, 'the checkout sits in a 0700 folder (mkdtemp)')
  const checkout = path.join(outer, 'checkout')
  await copyCheckout(checkout)
  const dataDir = path.join(checkout, 'data')
  const store = path.join(os.tmpdir(), `reaktor-pg-store-${randomBytes(6).toString('hex')}`)
  t.teardown(async () => await fs.rm(store, { recursive: true, force: true }))
  const env = { DATA_DIR: dataDir, EMBEDDED_POSTGRES_DIR: store, REAKTOR_APPS_DIR: path.join(checkout, 'reaktor-apps') }
  stopLeftoverAtTeardown(t, path.join(dataDir, 'postgres'))

  const first = startServer(env, checkout)
  t.teardown(() => { first.child.kill('SIGKILL') })
  const url = await listeningUrl(first)
  t.equal((await fetch(`${url}/readyz`)).status, 200, 'ready on the embedded database')
  const exampleApps = (await fs.readdir(path.join(checkout, 'reaktor-apps'), { withFileTypes: true })).filter((e) => e.isDirectory() && !e.name.startsWith('.')).length
  t.ok(exampleApps >= 3, 'the checkout has the example apps (the console among them)')
  t.equal([...first.output().matchAll(/"msg":"reaktor app loaded"/g)].length, exampleApps, 'the example apps are loaded')
  t.equal(await login(url, dataDir), 200, 'the printed admin password logs in')

  const clusterDir = await fs.realpath(path.join(dataDir, 'postgres'))
  if (asRoot) {
    t.match(first.output(), /copying the PostgreSQL binaries where the postgres user can reach them/)
    const version = JSON.parse(await fs.readFile(path.join(ROOT, 'node_modules', PG_PACKAGE, 'package.json'), 'utf8')).version as string
    await fs.access(path.join(store, `postgres-${os.platform()}-${os.arch()}-${version}`, 'bin', 'pg_ctl'))
    t.pass('the binaries were copied once into EMBEDDED_POSTGRES_DIR')
    t.ok((await fs.lstat(path.join(dataDir, 'postgres'))).isSymbolicLink(), 'DATA_DIR/postgres is a link')
    t.match(clusterDir, new RegExp(`^${store}/clusters/[0-9a-f]{16}/postgres$`), 'to a cluster in EMBEDDED_POSTGRES_DIR')
    t.equal((await fs.stat(outer)).mode & 0o777, 0o700, 'the 0700 folder was left as it was')
  } else {
    t.equal(clusterDir, path.join(dataDir, 'postgres'), 'not root: PostgreSQL runs as us and the cluster stays in DATA_DIR')
  }
  t.equal(await stop(first), 0, 'SIGTERM exits 0')
  t.equal(await postmasterPid(clusterDir), undefined, 'and its database was stopped')

  const second = startServer(env, checkout)
  t.teardown(() => { second.child.kill('SIGKILL') })
  const url2 = await listeningUrl(second)
  t.equal(await login(url2, dataDir), 200, 'the data was kept: the same admin password logs in')
  t.notMatch(second.output(), /copying the PostgreSQL binaries|initialising embedded PostgreSQL/, 'no copy, no initdb the second time')

  // kill -9 leaves the server running without its service, wherever the cluster lives.
  second.child.kill('SIGKILL')
  await second.exited
  const orphan = await postmasterPid(clusterDir)
  t.ok(orphan !== undefined && alive(orphan), 'the killed service left its server running')
  const third = startServer(env, checkout)
  t.teardown(() => { third.child.kill('SIGKILL') })
  const url3 = await listeningUrl(third)
  t.match(third.output(), /stopping the embedded PostgreSQL orphaned by a previous run/, 'the next start recovers the orphan')
  t.equal(await login(url3, dataDir), 200, 'on the same data')
  t.equal(await stop(third), 0)
  t.equal(await postmasterPid(clusterDir), undefined)
})

t.test('as root, a database the postgres user can never reach stops the start with one line naming the folder, its mode and the fix', async (t) => {
  const outer = await tempDir(t, 'reaktor-0700-')
  const dataDir = path.join(outer, 'data')
  // A cluster made in place earlier (say, when the folder was open): it cannot be moved silently.
  await fs.mkdir(path.join(dataDir, 'postgres'), { recursive: true })
  await fs.writeFile(path.join(dataDir, 'postgres', 'PG_VERSION'), '18\n')
  const server = startServer({ DATA_DIR: dataDir })
  t.teardown(() => { server.child.kill('SIGKILL') })
  t.equal(await server.exited, 1)
  const lines = server.output().trim().split('\n')
  if (asRoot) {
    t.equal(lines.length, 1, 'one line')
    t.equal(lines[0], `reaktor-service: failed to start: embedded PostgreSQL: the postgres user cannot reach the database in ${dataDir}/postgres: ` +
      `${outer} has mode 0700 (owner root), and as root PostgreSQL runs as postgres, since it refuses to run as root. ` +
      `Fix: chmod o+x ${outer}, or move DATA_DIR into a folder the postgres user can enter`)
  } else {
    t.match(lines.at(-1), /failed to start: embedded PostgreSQL in .* did not start/, 'not root: the fake cluster itself is refused')
  }

  // EMBEDDED_POSTGRES_DIR out of reach too: the store cannot help, and says so.
  if (asRoot) {
    const other = path.join(outer, 'other-data')
    const storeInside = path.join(outer, 'store')
    const refused = startServer({ DATA_DIR: other, EMBEDDED_POSTGRES_DIR: storeInside })
    t.teardown(() => { refused.child.kill('SIGKILL') })
    t.equal(await refused.exited, 1)
    t.equal(refused.output().trim(), `reaktor-service: failed to start: embedded PostgreSQL: the postgres user cannot reach EMBEDDED_POSTGRES_DIR ${storeInside}: ` +
      `${outer} has mode 0700 (owner root), and as root PostgreSQL runs as postgres, since it refuses to run as root. ` +
      `Fix: chmod o+x ${outer}, or set EMBEDDED_POSTGRES_DIR to a folder the postgres user can enter`)
  }
})

t.test('starts racing on one DATA_DIR: one serves, the others fail naming it, and no start stops its database', async (t) => {
  const dataDir = await tempDir(t, 'reaktor-race-')
  const clusterDir = path.join(dataDir, 'postgres')
  stopLeftoverAtTeardown(t, clusterDir)
  for (let round = 1; round <= 3; round++) {
    const servers = [1, 2, 3].map(() => startServer({ DATA_DIR: dataDir }))
    t.teardown(() => { for (const s of servers) s.child.kill('SIGKILL') })
    const outcomes = await Promise.all(servers.map(startOutcome))
    const winners = servers.filter((_s, i) => 'url' in outcomes[i])
    t.equal(winners.length, 1, `round ${round}: exactly one of three starts serves`)
    const [winner] = winners
    const url = (outcomes[servers.indexOf(winner)] as { url: string }).url
    const inUse = new RegExp(`^reaktor-service: failed to start: the embedded PostgreSQL of DATA_DIR ${dataDir} is in use by another reaktor-service process \\(pid ${winner.child.pid}\\); `)
    for (const loser of servers.filter((s) => s !== winner)) {
      t.equal(await loser.exited, 1, `round ${round}: the other start exits 1`)
      t.match(loser.output().trim(), inUse, `round ${round}: naming the process that has the folder`)
    }
    const serving = await postmasterPid(clusterDir)
    t.ok(serving !== undefined && alive(serving), `round ${round}: the winner's database runs`)

    // A start after the race must not take the winner for gone, even with DATA_DIR naming a dead
    // loser as the owner of its database (as a failed start used to leave it).
    await fs.writeFile(path.join(dataDir, 'postgres.owner'), String(servers.find((s) => s !== winner)!.child.pid))
    const late = startServer({ DATA_DIR: dataDir })
    t.teardown(() => { late.child.kill('SIGKILL') })
    t.same(await startOutcome(late), { code: 1 }, `round ${round}: a later start is turned away too`)
    t.match(late.output().trim(), inUse)
    t.equal(await postmasterPid(clusterDir), serving, `round ${round}: the winner's database was never stopped or replaced`)
    t.equal((await fetch(`${url}/readyz`)).status, 200, `round ${round}: the winner is still ready`)

    t.equal(await stop(winner), 0)
    t.equal(await postmasterPid(clusterDir), undefined, `round ${round}: the winner stopped its own database on SIGTERM`)
  }
})

t.test('in one process: a second start on a DATA_DIR in use fails and touches nothing; stop() stops only the server it started', async (t) => {
  const dataDir = await tempDir(t, 'reaktor-embedded-')
  const log = memoryLogger()
  const first = await startEmbeddedPostgres({ dataDir, log })
  t.teardown(async () => await first.stop())
  const clusterDir = path.join(dataDir, 'postgres')
  const serving = await postmasterPid(clusterDir)
  await t.rejects(startEmbeddedPostgres({ dataDir, log }), { message: new RegExp(`DATA_DIR ${dataDir} is in use by another reaktor-service process \\(pid ${process.pid}\\)`) })
  t.equal(await postmasterPid(clusterDir), serving, 'the running server was left alone')

  // Someone restarts the server behind the service's back: that one is not the service's to stop.
  const { bin, user } = await postgresBinaries(DEFAULT_EMBEDDED_POSTGRES_DIR, silentLogger)
  const asPostgres = async (args: string[]): Promise<void> => { await execFileAsync(bin.pg_ctl, args, { ...user }) }
  await asPostgres(['stop', '-D', clusterDir, '-m', 'fast', '-w'])
  await asPostgres(['start', '-D', clusterDir, '-w', '-l', path.join(clusterDir, 'server.log'), '-o', `-p ${await freePort()} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''`])
  t.teardown(async () => { await asPostgres(['stop', '-D', clusterDir, '-m', 'immediate', '-w']).catch(() => {}) })
  const other = await postmasterPid(clusterDir)
  t.ok(other !== undefined && other !== serving, 'another server runs in the folder')

  await first.stop()
  t.equal(await postmasterPid(clusterDir), other, 'stop() left it running')
  t.ok(alive(other!), 'and alive')
  t.ok(log.lines.some((l) => l.level === 'warn' && /not stopping the PostgreSQL .*not the server this process started/.test(l.msg ?? '')), 'and said why')

  // The folder is free again after stop(): the next start recovers it as a previous run's orphan.
  const next = await startEmbeddedPostgres({ dataDir, log })
  t.teardown(async () => await next.stop())
  t.ok(log.lines.some((l) => l.level === 'warn' && /orphaned by a previous run/.test(l.msg ?? '')), 'the orphan is named in the log')
  // pg_ctl stop returns once the lock file is gone, a moment before the process itself is.
  await waitFor(() => !alive(other!), { what: 'the orphan to exit' })
  t.pass('the orphan was stopped')
  const replaced = await postmasterPid(clusterDir)
  t.ok(replaced !== undefined && replaced !== other && alive(replaced), 'and the new start runs its own server')
})

t.test('as root, a copy of a DATA_DIR whose cluster lives in EMBEDDED_POSTGRES_DIR cannot run that cluster beside the original', async (t) => {
  const outer = await tempDir(t, 'reaktor-0700-')
  const storeDir = path.join(os.tmpdir(), `reaktor-pg-store-${randomBytes(6).toString('hex')}`)
  t.teardown(async () => await fs.rm(storeDir, { recursive: true, force: true }))
  const original = path.join(outer, 'data')
  stopLeftoverAtTeardown(t, path.join(original, 'postgres'))
  const first = await startEmbeddedPostgres({ dataDir: original, storeDir, log: silentLogger })
  t.teardown(async () => await first.stop())
  const clusterDir = await fs.realpath(path.join(original, 'postgres'))
  const serving = await postmasterPid(clusterDir)
  t.ok(serving !== undefined && alive(serving), 'a DATA_DIR inside a 0700 folder starts (before, initdb could not read its password file there)')
  if (asRoot) t.match(clusterDir, new RegExp(`^${storeDir}/clusters/[0-9a-f]{16}/postgres$`), 'its cluster is in EMBEDDED_POSTGRES_DIR')

  // `cp -a` keeps DATA_DIR/postgres as it is: as root a link, so the copy names the same cluster.
  const copy = path.join(outer, 'copy')
  await fs.cp(original, copy, { recursive: true, verbatimSymlinks: true })
  if (asRoot) {
    t.equal(await fs.realpath(path.join(copy, 'postgres')), clusterDir, 'the copy links to the same cluster')
    await t.rejects(startEmbeddedPostgres({ dataDir: copy, storeDir, log: silentLogger }),
      { message: new RegExp(`DATA_DIR ${copy} is in use by another reaktor-service process \\(pid ${process.pid}\\)`) })
    t.equal(await postmasterPid(clusterDir), serving, 'the original\'s server was left alone')
  } else {
    const second = await startEmbeddedPostgres({ dataDir: copy, storeDir, log: silentLogger })
    t.teardown(async () => await second.stop())
    t.equal(await postmasterPid(clusterDir), serving, 'not root: the copy holds a cluster of its own, and the original\'s server was left alone')
  }
})

t.test('DATA_DIR/postgres linking elsewhere to no database (a folder with files, a file) is refused as root, and what it links to is left as it was', async (t) => {
  const outer = await tempDir(t, 'reaktor-link-')
  const storeDir = path.join(os.tmpdir(), `reaktor-pg-store-${randomBytes(6).toString('hex')}`)
  // Beside the test's folder, in the 1777 temporary folder: the postgres user can reach it.
  const elsewhere = path.join(os.tmpdir(), `reaktor-not-a-cluster-${randomBytes(6).toString('hex')}`)
  t.teardown(async () => {
    await fs.rm(storeDir, { recursive: true, force: true })
    await fs.rm(elsewhere, { recursive: true, force: true })
    await fs.rm(`${elsewhere}.txt`, { recursive: true, force: true })
  })
  await fs.mkdir(elsewhere, { mode: 0o755 })
  await fs.chmod(elsewhere, 0o755)
  await fs.writeFile(path.join(elsewhere, 'keep-me'), 'someone\'s data\n', { mode: 0o644 })
  await fs.writeFile(`${elsewhere}.txt`, 'someone\'s file\n', { mode: 0o755 })
  await fs.chmod(`${elsewhere}.txt`, 0o755)

  for (const target of [elsewhere, `${elsewhere}.txt`]) {
    const dataDir = path.join(outer, `data-${path.extname(target) === '' ? 'folder' : 'file'}`)
    await fs.mkdir(dataDir)
    await fs.symlink(target, path.join(dataDir, 'postgres'))
    stopLeftoverAtTeardown(t, target)
    const outcome = await startEmbeddedPostgres({ dataDir, storeDir, log: silentLogger })
      .then(async (pg) => { await pg.stop(); return undefined }, (err: Error) => err)
    if (asRoot) {
      t.match(outcome?.message, `embedded PostgreSQL: ${path.join(dataDir, 'postgres')} links to ${target}, which holds no database`, `a link to ${target} stops the start`)
    } else {
      t.equal(outcome, undefined, 'not root: the link is replaced by a cluster folder in DATA_DIR')
    }
  }
  t.equal(await fs.readFile(path.join(elsewhere, 'keep-me'), 'utf8'), 'someone\'s data\n', 'the linked folder still holds its file')
  t.equal(await fs.readFile(`${elsewhere}.txt`, 'utf8'), 'someone\'s file\n', 'the linked file is still there')
  const { uid } = await fs.stat(elsewhere)
  t.equal(uid, process.getuid?.(), 'and the linked folder keeps its owner')
})

t.test('DATA_DIR/postgres linking to the folder of a PostgreSQL this service did not start: the start fails naming it, and that server is left alone', async (t) => {
  const dataDir = await tempDir(t, 'reaktor-foreign-data-')
  // Someone else's cluster, where the postgres user can reach it: beside the test's folder.
  const folder = path.join(os.tmpdir(), `reaktor-foreign-${randomBytes(6).toString('hex')}`)
  const clusterDir = path.join(folder, 'main')
  const { bin, user } = await postgresBinaries(DEFAULT_EMBEDDED_POSTGRES_DIR, silentLogger)
  const asPostgres = async (file: string, args: string[]): Promise<void> => { await execFileAsync(file, args, { ...user }) }
  t.teardown(async () => {
    await asPostgres(bin.pg_ctl, ['stop', '-D', clusterDir, '-m', 'immediate', '-w']).catch(() => {})
    await fs.rm(folder, { recursive: true, force: true })
  })
  await fs.mkdir(clusterDir, { recursive: true, mode: 0o700 })
  await fs.chmod(folder, 0o755)
  if (user !== undefined) await fs.chown(clusterDir, user.uid, user.gid)
  await asPostgres(bin.initdb, [`--pgdata=${clusterDir}`, '--auth=trust', '--username=someone', '--encoding=UTF8', '--locale=C'])
  // Started as its owner would: not with the command line this service gives its own servers.
  await asPostgres(bin.pg_ctl, ['start', '-D', clusterDir, '-w', '-l', path.join(clusterDir, 'server.log'), '-o', `-p ${await freePort()} -c listen_addresses=127.0.0.1 -k ${clusterDir}`])
  const foreign = await postmasterPid(clusterDir)
  t.ok(foreign !== undefined && alive(foreign), 'someone else\'s server runs')
  const startedAt = async (): Promise<string> => {
    const client = new pg.Client({ host: '127.0.0.1', port: Number((await fs.readFile(path.join(clusterDir, 'postmaster.pid'), 'utf8')).split('\n')[3]), user: 'someone', database: 'postgres' })
    await client.connect()
    try {
      return String((await client.query<{ at: Date }>('select pg_postmaster_start_time() as at')).rows[0].at.getTime())
    } finally {
      await client.end()
    }
  }
  const before = await startedAt()

  await fs.symlink(clusterDir, path.join(dataDir, 'postgres'))
  await t.rejects(startEmbeddedPostgres({ dataDir, log: silentLogger }),
    { message: `embedded PostgreSQL: a PostgreSQL server this service did not start (pid ${foreign}) runs in ${clusterDir}` })
  t.equal(await postmasterPid(clusterDir), foreign, 'its lock file was left as it was')
  t.equal(await startedAt(), before, 'and the server was never stopped: it answers, started when it was')
})
