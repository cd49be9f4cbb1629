/**
 * `reaktor migrate` and `reaktor admin reset-password`: the command itself (a subprocess, as
 * `npx reaktor` runs it) straight on a database of the test's own, through DATABASE_URL. REAKTOR_URL
 * and REAKTOR_TOKEN point nowhere: these commands never use them.
 */
import t from 'tap'
import { migrations } from '../../src/db/migrations/index.js'
import { ADMIN, ADMIN_ENV, apiLogin } from '../helpers/auth.js'
import { build } from '../helpers/app.js'
import { cliHome, runCli, type CliResult } from '../helpers/cli.js'
import type { TestContext } from '../helpers/test-context.js'
import { createEmptyDatabase, createTestDatabase } from '../helpers/database.js'

const UNREACHABLE = 'postgres://reaktor@127.0.0.1:1/nothing'

async function onDatabase (t: TestContext, databaseUrl: string): Promise<(args: string[], stdin?: string) => Promise<CliResult>> {
  const home = await cliHome(t)
  const env = { XDG_CONFIG_HOME: home, DATABASE_URL: databaseUrl, NODE_ID: 'cli-database-test', REAKTOR_URL: 'http://127.0.0.1:1', REAKTOR_TOKEN: 'reaktor_pat_not-a-token' }
  return async (args, stdin) => await runCli(args, { env, stdin })
}

t.test('migrate: applies every migration to an empty database, then finds it up to date; an unreachable or misconfigured database exits 1', async (t) => {
  const reaktor = await onDatabase(t, await createEmptyDatabase(t))
  const first = await reaktor(['migrate'])
  t.equal(first.code, 0, first.stderr)
  t.same(first.stdout.trimEnd().split('\n'), Object.keys(migrations).map((name) => `Success: ${name}`), 'each migration, in order')

  const [again, json, unreachable, misconfigured] = await Promise.all([
    reaktor(['migrate']),
    reaktor(['--json', 'migrate']),
    (await onDatabase(t, UNREACHABLE))(['migrate']),
    (await onDatabase(t, 'mysql://reaktor@127.0.0.1/reaktor'))(['migrate'])
  ])
  t.equal(again.code, 0, again.stderr)
  t.equal(again.stdout, 'database schema is up to date\n')
  t.same(JSON.parse(json.stdout), { applied: [] }, '--json: what was applied')
  t.equal(unreachable.code, 1)
  t.match(unreachable.stderr, /^reaktor: database migration failed: connect ECONNREFUSED/m)
  t.equal(unreachable.stdout, '')
  t.equal(misconfigured.code, 1)
  t.match(misconfigured.stderr, /^reaktor: invalid configuration: DATABASE_URL/m)
})

t.test('admin reset-password: a generated password alone on stdout, --password-stdin, --json; exit 3 unknown, 2 usage, 1 unreachable', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  // A node creates the ADMIN_ENV user on its start.
  const app = await build(t, { databaseUrl, env: ADMIN_ENV })
  const reaktor = await onDatabase(t, databaseUrl)
  const logsIn = async (password: string): Promise<boolean> => (await apiLogin(app, { username: ADMIN.username, password })).statusCode === 200

  const [generated, unknown, short, missing, unreachable] = await Promise.all([
    reaktor(['admin', 'reset-password', ADMIN.username]),
    reaktor(['admin', 'reset-password', 'nobody']),
    reaktor(['admin', 'reset-password', '--password-stdin', ADMIN.username], 'short\n'),
    reaktor(['admin', 'reset-password']),
    (await onDatabase(t, UNREACHABLE))(['admin', 'reset-password', ADMIN.username])
  ])
  t.equal(generated.code, 0, generated.stderr)
  t.match(generated.stdout, /^[A-Za-z0-9_-]{24}\n$/, 'the new password alone on stdout')
  t.match(generated.stderr, 'The password of user "alice" is reset')
  t.notOk(await logsIn(ADMIN.password), 'the old password no longer logs in')
  t.ok(await logsIn(generated.stdout.trim()), 'the printed one does')
  t.equal(unknown.code, 3)
  t.match(unknown.stderr, 'there is no user "nobody"; nothing was changed')
  t.equal(short.code, 2)
  t.match(short.stderr, 'the password is too short')
  t.equal(missing.code, 2)
  t.match(missing.stderr, "missing required argument 'username'")
  t.equal(unreachable.code, 1)
  t.match(unreachable.stderr, /ECONNREFUSED/)
  for (const r of [unknown, short, missing, unreachable]) t.equal(r.stdout, '', 'nothing on stdout when it fails')
  for (const r of [unknown, short, unreachable]) t.notMatch(r.stderr, /^reaktor: *$/m, 'no empty error line after the command\'s own')
  t.ok(await logsIn(generated.stdout.trim()), 'none of the failed ones changed the password')

  const chosen = await reaktor(['--json', 'admin', 'reset-password', '--password-stdin', 'ALICE'], 'alice chose this\n')
  t.equal(chosen.code, 0, chosen.stderr)
  t.same(JSON.parse(chosen.stdout), { username: 'ALICE' }, '--json: no password when it was given')
  t.ok(await logsIn('alice chose this'), 'the password from stdin logs in')
  const json = await reaktor(['--json', 'admin', 'reset-password', ADMIN.username])
  const answer = JSON.parse(json.stdout)
  t.match(answer, { username: ADMIN.username, password: /^[A-Za-z0-9_-]{24}$/ })
  t.ok(await logsIn(answer.password), '--json: the generated password in the answer logs in')
})
