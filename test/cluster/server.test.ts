/**
 * The real server process: configuration errors, start on the embedded database, graceful
 * SIGTERM, and a start after the previous run was killed with SIGKILL.
 */
import t from 'tap'
import fs from 'node:fs/promises'
import net from 'node:net'
import path from 'node:path'
import { tempDir } from '../helpers/temp-dir.js'
import { listeningUrl, startServer } from '../helpers/server.js'

t.test('a bad variable stops the start with exit 1 and one line naming it', async (t) => {
  for (const [name, value] of [['PORT', 'abc'], ['SESSION_TTL', '5 parsecs'], ['DATABASE_URL', 'http//nope']]) {
    const server = startServer({ [name]: value })
    const code = await server.exited
    t.equal(code, 1, `${name} exits 1`)
    const lines = server.output().trim().split('\n')
    t.equal(lines.length, 1, `${name}: one line, no stack trace`)
    t.match(lines[0], new RegExp(`invalid configuration: ${name}: `))
  }
})

t.test('starts on the embedded database, survives kill -9, stops cleanly on SIGTERM', async (t) => {
  const dataDir = await tempDir(t, 'reaktor-server-')
  // mkdtemp makes it 0700: as root, the service itself must let the `postgres` user through.
  const first = startServer({ DATA_DIR: dataDir })
  t.teardown(() => { first.child.kill('SIGKILL') })
  const url = await listeningUrl(first)
  t.equal((await fetch(`${url}/readyz`)).status, 200)
  t.match(first.output(), /initial-admin-password/, 'says where the admin password is')
  const password = (await fs.readFile(path.join(dataDir, 'initial-admin-password'), 'utf8')).trim()
  t.equal(((await fs.stat(path.join(dataDir, 'initial-admin-password'))).mode & 0o777), 0o600)
  const login = await fetch(`${url}/api/v1/auth/login`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password })
  })
  t.equal(login.status, 200, 'the printed admin password logs in')
  t.equal((await fetch(`${url}/login`)).status, 200, 'serves the login page')

  // SIGKILL leaves the embedded PostgreSQL running without its owner.
  first.child.kill('SIGKILL')
  await first.exited

  const second = startServer({ DATA_DIR: dataDir })
  t.teardown(() => { second.child.kill('SIGKILL') })
  const url2 = await listeningUrl(second)
  t.equal((await fetch(`${url2}/readyz`)).status, 200, 'ready again after kill -9')
  t.match(second.output(), /orphaned by a previous run/)

  second.child.kill('SIGTERM')
  t.equal(await second.exited, 0, 'SIGTERM exits 0')
  t.match(second.output(), /"msg":"stopped"/)

  // A stale lock file naming a live process that is not our server (PID reuse after a reboot):
  // the start must neither stop that process nor give up.
  await fs.writeFile(path.join(dataDir, 'postgres', 'postmaster.pid'), `${process.pid}\n${path.join(dataDir, 'postgres')}\n`)

  // And the database it stopped starts again with the data kept.
  const third = startServer({ DATA_DIR: dataDir })
  t.teardown(() => { third.child.kill('SIGKILL') })
  const url3 = await listeningUrl(third)
  t.equal((await fetch(`${url3}/readyz`)).status, 200)
  t.notMatch(third.output(), /initialising embedded PostgreSQL/, 'the cluster is reused, not re-created')
  t.match(third.output(), /removing stale PostgreSQL lock file/)
  third.child.kill('SIGTERM')
  t.equal(await third.exited, 0)
})

t.test('a start that fails after the database is up leaves nothing running', async (t) => {
  const dataDir = await tempDir(t, 'reaktor-server-')
  const blocker = net.createServer()
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve))
  t.teardown(() => blocker.close())
  const port = (blocker.address() as net.AddressInfo).port
  const server = startServer({ DATA_DIR: dataDir, PORT: String(port) })
  t.teardown(() => { server.child.kill('SIGKILL') })
  t.equal(await server.exited, 1)
  t.match(server.output(), /failed to start: listen EADDRINUSE/)
  t.match(server.output(), /embedded PostgreSQL started/, 'the database had started')
  // pg_ctl stop removes the lock file once the server is down.
  await t.rejects(fs.access(path.join(dataDir, 'postgres', 'postmaster.pid')), 'and was stopped again')
})
