/**
 * `npm run admin:reset-password`: the command itself, spawned against a test database, while a node
 * of the service runs on that database. The new password logs in; the old one, every session and
 * every API token of the user stop working, also on the running node that had them cached.
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { ADMIN, ADMIN_ENV, apiLogin, loginToken, untilCached, whoami } from '../helpers/auth.js'
import { build } from '../helpers/app.js'
import { bound, waitFor } from '../helpers/timing.js'
import { createTestDatabase } from '../helpers/database.js'
import { ROOT } from '../helpers/paths.js'

const NODE_ID = 'reset-password-test'

interface Outcome { code: number | null, stdout: string, stderr: string }

/** Runs the command's entry point (what the npm script runs, from source) with `stdin` as its input. */
async function resetCommand (databaseUrl: string, args: string[], stdin = ''): Promise<Outcome> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/reset-password-cli.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: databaseUrl, NODE_ID },
    stdio: ['pipe', 'pipe', 'pipe']
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d: Buffer) => { stdout += d.toString() })
  child.stderr.on('data', (d: Buffer) => { stderr += d.toString() })
  child.stdin.end(stdin)
  const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)))
  return { code, stdout, stderr }
}

async function userOf (app: FastifyInstance, username: string) {
  return await app.db.selectFrom('users').select(['id', 'disabled_at']).where('username', '=', username).executeTakeFirstOrThrow()
}

async function resetAudit (app: FastifyInstance) {
  return await app.db.selectFrom('audit').select(['actor', 'address', 'node', 'targets', 'details']).where('action', '=', 'user.password_reset').execute()
}

t.test('a random new password: printed once, logs in; sessions and tokens end, also where cached', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const app = await build(t, { whoami: true, databaseUrl, env: ADMIN_ENV })
  const session = await loginToken(app)
  await untilCached(app, session, 'the session on the running node')
  const user = await userOf(app, ADMIN.username)
  await app.db.insertInto('api_tokens').values({ user_id: user.id, name: 'deploy script', token_hash: randomBytes(32) }).execute()

  const started = performance.now()
  const run = await resetCommand(databaseUrl, [ADMIN.username])
  const exited = performance.now()
  t.equal(run.code, 0, run.stderr)
  t.match(run.stdout, /^[A-Za-z0-9_-]{24}\n$/, 'stdout is the new password alone')
  const password = run.stdout.trim()
  t.match(run.stderr, /The password of user "alice" is reset and every session and API token of the user has ended/)
  t.notMatch(run.stderr, password, 'the password is printed once, on stdout only')

  // The promise is 1 s after the change.
  await waitFor(async () => (await whoami(app, session)).statusCode === 401, { timeoutMs: bound(1000, 'second'), intervalMs: 10, what: 'the running node to refuse the old session' })
  t.comment(`command ran ${(exited - started).toFixed(0)} ms; the running node refused the old session ${(performance.now() - exited).toFixed(0)} ms after the command exited`)
  t.same(await app.db.selectFrom('api_tokens').select('id').where('user_id', '=', user.id).execute(), [], 'the API token is gone')

  t.equal((await apiLogin(app, ADMIN)).statusCode, 401, 'the old password no longer logs in')
  t.equal((await apiLogin(app, { username: ADMIN.username, password })).statusCode, 200, 'the new one does')
  t.same(await resetAudit(app), [{ actor: null, address: null, node: NODE_ID, targets: [ADMIN.username], details: { via: 'command line' } }])
})

t.test('--password-stdin sets the password read from stdin, finds the user whatever the case, and enables a disabled user', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const app = await build(t, { whoami: true, databaseUrl, env: ADMIN_ENV })
  await app.db.updateTable('users').set({ disabled_at: new Date() }).where('username', '=', ADMIN.username).execute()

  // Exactly 12 characters (the least allowed), and the line break echo adds.
  const password = 'twelve chars'
  const run = await resetCommand(databaseUrl, ['--password-stdin', ADMIN.username.toUpperCase()], `${password}\n`)
  t.equal(run.code, 0, run.stderr)
  t.equal(run.stdout, '', 'nothing to print: the caller knows the password')
  t.match(run.stderr, /The password of user "alice" is reset, the user is enabled again, and every session/)
  t.equal((await userOf(app, ADMIN.username)).disabled_at, null)
  const login = await apiLogin(app, { username: ADMIN.username, password })
  t.equal(login.statusCode, 200, 'the password from stdin logs in')
  t.equal((await whoami(app, login.json().token as string)).statusCode, 200, 'and its session works: the user is enabled')
  t.same((await resetAudit(app)).map((r) => r.details), [{ via: 'command line', enabled: true }])
})

t.test('a bad password, an unknown user or bad usage change nothing', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const app = await build(t, { whoami: true, databaseUrl, env: ADMIN_ENV })
  const session = await loginToken(app)

  const cases: Array<{ args: string[], stdin?: string, code: number, stderr: RegExp, what: string }> = [
    { args: ['--password-stdin', ADMIN.username], stdin: 'eleven char\n', code: 2, stderr: /too short: 11 characters, at least 12/, what: '11 characters' },
    { args: ['--password-stdin', ADMIN.username], stdin: '', code: 2, stderr: /too short: 0 characters/, what: 'empty stdin' },
    // 1,025 characters of three bytes each: characters are counted, not bytes.
    { args: ['--password-stdin', ADMIN.username], stdin: '€'.repeat(1025), code: 2, stderr: /too long: 1025 characters, at most 1024/, what: '1,025 characters' },
    { args: ['nobody'], code: 3, stderr: /there is no user "nobody"; nothing was changed/, what: 'unknown user' },
    { args: [], code: 2, stderr: /name exactly one user\nusage: npm run admin:reset-password -- \[--password-stdin\] <username>/, what: 'no username' },
    { args: [ADMIN.username, 'bob'], code: 2, stderr: /name exactly one user/, what: 'two usernames' },
    { args: ['--pasword-stdin', ADMIN.username], code: 2, stderr: /Unknown option '--pasword-stdin'[\s\S]*usage:/, what: 'a misspelt option' }
  ]
  for (const c of cases) {
    const run = await resetCommand(databaseUrl, c.args, c.stdin)
    t.equal(run.code, c.code, `${c.what}: exit code (${run.stderr.trim()})`)
    t.match(run.stderr, c.stderr, `${c.what}: message`)
    t.equal(run.stdout, '', `${c.what}: no password printed`)
  }
  const help = await resetCommand(databaseUrl, ['--help'])
  t.equal(help.code, 0)
  t.match(help.stdout, /^usage: npm run admin:reset-password -- \[--password-stdin\] <username>/)

  t.equal((await whoami(app, session)).statusCode, 200, 'the session is still live')
  t.equal((await apiLogin(app, ADMIN)).statusCode, 200, 'the old password still logs in')
  t.same(await resetAudit(app), [], 'nothing audited')
})

t.test('a username with letters beyond ASCII is found as the login finds it', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const name = 'Zoë Ørsted'
  const app = await build(t, { databaseUrl, env: { ADMIN_USERNAME: name, ADMIN_PASSWORD: ADMIN.password } })
  for (const typed of [name, ' zOË øRSTED ']) {
    t.equal((await apiLogin(app, { username: typed, password: ADMIN.password })).statusCode, 200, `${JSON.stringify(typed)}: the login finds the user`)
  }
  for (const typed of [name, ' zOË øRSTED ']) {
    const password = `new password for ${typed.trim()}`
    const run = await resetCommand(databaseUrl, ['--password-stdin', typed], password)
    t.equal(run.code, 0, `${JSON.stringify(typed)}: the command finds the user too (${run.stderr.trim()})`)
    t.equal((await apiLogin(app, { username: name, password })).statusCode, 200, `${JSON.stringify(typed)}: the new password logs in`)
  }
})
