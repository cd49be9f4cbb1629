/**
 * `reaktor users …`, `reaktor passwd`, `reaktor tokens …` and `reaktor audit`: the command itself
 * (a subprocess, as `npx reaktor` runs it) against a listening service, with the token in
 * REAKTOR_TOKEN. What a terminal is needed for (the delete confirmation, the password prompts) runs
 * `main` in this process with a stand-in terminal.
 */
import { PassThrough } from 'node:stream'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { main } from '../../src/cli/main.js'
import type { CliIo } from '../../src/cli/context.js'
import { ADMIN_ENV, apiAs, apiLogin, createApiToken, loginToken } from '../helpers/auth.js'
import { listeningApp } from '../helpers/browser.js'
import { cliHome, runCli, type CliResult } from '../helpers/cli.js'

const GENERATED_PASSWORD = /^[A-Za-z0-9_-]{24}\n$/
const API_TOKEN = /^reaktor_pat_[A-Za-z0-9_-]{43}\n$/

interface Service { app: FastifyInstance, base: string, home: string, admin: string }

async function service (t: Tap.Test): Promise<Service> {
  const { app, base } = await listeningApp(t, { env: ADMIN_ENV })
  return { app, base, home: await cliHome(t), admin: await loginToken(app) }
}

/** `reaktor <args>` as the holder of `token` (the admin's login session unless told). */
async function cli (s: Service, args: string[], opts: { token?: string, stdin?: string } = {}): Promise<CliResult> {
  return await runCli(args, { env: { XDG_CONFIG_HOME: s.home, REAKTOR_URL: s.base, REAKTOR_TOKEN: opts.token ?? s.admin }, stdin: opts.stdin })
}

async function logsIn (app: FastifyInstance, username: string, password: string): Promise<boolean> {
  return (await apiLogin(app, { username, password })).statusCode === 200
}

async function userOf (s: Service, username: string): Promise<{ statusCode: number, body: any }> {
  return await apiAs(s.app, s.admin)('GET', `/api/v1/users/${username}`)
}

t.test('users: create, list, show, set-role, disable, enable, reset-password and delete, as tables and as --json', async (t) => {
  const s = await service(t)

  const created = await cli(s, ['users', 'create', 'bob'])
  t.equal(created.code, 0, created.stderr)
  t.match(created.stdout, GENERATED_PASSWORD, 'the generated password alone on stdout')
  t.match(created.stderr, 'User "bob" (operator) created; the generated password follows, shown this once')
  t.notMatch(created.stderr, created.stdout.trim(), 'the password is not on stderr')
  t.ok(await logsIn(s.app, 'bob', created.stdout.trim()), 'the printed password logs bob in')

  const chosen = 'carol chose this one'
  const carol = await cli(s, ['--json', 'users', 'create', 'carol', '--role', 'admin', '--password-stdin'], { stdin: `${chosen}\n` })
  t.equal(carol.code, 0, carol.stderr)
  const carolJson = JSON.parse(carol.stdout)
  t.match(carolJson, { user: { username: 'carol', role: 'admin', disabled: false } }, '--json: the API answer')
  t.notOk('password' in carolJson, 'no password in the answer when it was given')
  t.ok(await logsIn(s.app, 'carol', chosen), 'the password from stdin, without its line break, logs carol in')

  const list = await cli(s, ['users', 'list'])
  t.equal(list.code, 0, list.stderr)
  const lines = list.stdout.trimEnd().split('\n')
  t.match(lines[0], /^USERNAME\s+ROLE\s+STATUS\s+CREATED\s+UPDATED$/)
  t.same(lines.slice(1).map((l) => l.split(/\s+/).slice(0, 3)), [['alice', 'admin', 'enabled'], ['bob', 'operator', 'enabled'], ['carol', 'admin', 'enabled']])
  const listJson = await cli(s, ['--json', 'users', 'list'])
  t.same(JSON.parse(listJson.stdout).users.map((u: { username: string }) => u.username), ['alice', 'bob', 'carol'])

  const shown = await cli(s, ['users', 'show', 'BOB'])
  t.equal(shown.code, 0, shown.stderr)
  t.match(shown.stdout, /^username: +bob\nrole: +operator\nstatus: +enabled\nid: +\d+\ncreated: +\S+\nupdated: +\S+\n$/, 'the user, found without regard to case')

  const promoted = await cli(s, ['users', 'set-role', 'bob', 'admin'])
  t.match(promoted.stdout, /^role: +admin$/m)
  t.equal((await userOf(s, 'bob')).body.role, 'admin', 'the service has the new role')
  const disabled = await cli(s, ['users', 'disable', 'bob'])
  t.match(disabled.stdout, /^status: +disabled$/m)
  t.equal((await userOf(s, 'bob')).body.disabled, true)
  const enabled = await cli(s, ['--json', 'users', 'enable', 'bob'])
  t.match(JSON.parse(enabled.stdout), { username: 'bob', role: 'admin', disabled: false })

  const reset = await cli(s, ['users', 'reset-password', 'bob'])
  t.equal(reset.code, 0, reset.stderr)
  t.match(reset.stdout, GENERATED_PASSWORD)
  t.match(reset.stderr, 'The password of user "bob" is reset')
  t.ok(await logsIn(s.app, 'bob', reset.stdout.trim()), 'the reset password logs bob in')
  const resetJson = JSON.parse((await cli(s, ['--json', 'users', 'reset-password', 'bob'])).stdout)
  t.match(resetJson, { user: { username: 'bob' }, password: /^[A-Za-z0-9_-]{24}$/ })
  t.ok(await logsIn(s.app, 'bob', resetJson.password))
  const resetStdin = await cli(s, ['users', 'reset-password', 'bob', '--password-stdin'], { stdin: 'bob gets this one\n' })
  t.equal(resetStdin.code, 0, resetStdin.stderr)
  t.match(resetStdin.stdout, /^username: +bob$/m, 'the user on stdout, no password')
  t.ok(await logsIn(s.app, 'bob', 'bob gets this one'))

  const unconfirmed = await cli(s, ['users', 'delete', 'bob'])
  t.equal(unconfirmed.code, 2, 'without a terminal, delete needs --yes')
  t.match(unconfirmed.stderr, 'add --yes to confirm')
  t.equal((await userOf(s, 'bob')).statusCode, 200, 'bob is still there')
  const deleted = await cli(s, ['users', 'delete', 'bob', '--yes'])
  t.equal(deleted.code, 0, deleted.stderr)
  t.equal(deleted.stdout, 'User "bob" deleted\n')
  t.equal((await userOf(s, 'bob')).statusCode, 404)
  t.same(JSON.parse((await cli(s, ['--json', 'users', 'delete', 'carol', '--yes'])).stdout), { message: 'User "carol" deleted' })
})

t.test('exit codes: 3 for an unknown user or token, 4 for an operator on an admin command or no token, 2 for bad arguments', async (t) => {
  const s = await service(t)
  const operator = { username: 'dave', password: 'dave the operator' }
  t.equal((await apiAs(s.app, s.admin)('POST', '/api/v1/users', { ...operator, role: 'operator' })).statusCode, 201)
  const dave = await loginToken(s.app, operator)

  const cases: Array<[string[], number, RegExp, { token?: string, stdin?: string }?]> = [
    [['users', 'show', 'nobody'], 3, /No user|not found|nobody/i],
    [['users', 'reset-password', 'nobody'], 3, /nobody|not found/i],
    [['users', 'delete', 'nobody', '--yes'], 3, /nobody|not found/i],
    [['tokens', 'revoke', '00000000-0000-4000-8000-000000000000'], 3, /token/i],
    [['users', 'list'], 4, /admin/i, { token: dave }],
    [['audit'], 4, /admin/i, { token: dave }],
    [['users', 'list'], 4, /reaktor login|REAKTOR_TOKEN/, { token: 'reaktor_pat_' + 'x'.repeat(43) }],
    [['users', 'set-role', 'dave', 'boss'], 2, /Allowed choices are admin, operator/],
    [['users', 'create', 'erin', '--role', 'boss'], 2, /Allowed choices are admin, operator/],
    [['users', 'create', 'erin', '--password-stdin'], 2, /too short: 5 characters, at least 12/, { stdin: 'short\n' }],
    [['users', 'show', 'a\u0007b'], 2, /username: printable characters only/],
    [['users', 'frobnicate'], 2, /unknown command/],
    [['audit', '--limit', '501'], 2, /expected an integer from 1 to 500/],
    [['audit', '--before', 'not-a-cursor'], 2, /before/],
    [['tokens', 'create', 'x', '--expires-in', 'soon'], 2, /expected an integer and a unit/],
    [['tokens', 'create', 'x', '--expires-in', '1s'], 2, /1m|expiresIn/]
  ]
  // Each is its own process: run them together.
  const results = await Promise.all(cases.map(async ([args, , , opts]) => await cli(s, args, opts)))
  cases.forEach(([args, code, message], i) => {
    t.equal(results[i].code, code, `reaktor ${args.join(' ')} exits ${code}`)
    t.match(results[i].stderr, message, `reaktor ${args.join(' ')}: ${results[i].stderr.trim()}`)
    t.equal(results[i].stdout, '', 'nothing on stdout')
  })
  t.equal((await userOf(s, 'erin')).statusCode, 404, 'no bad argument created a user')
  t.equal((await userOf(s, 'dave')).body.role, 'operator', 'nor changed one')
})

t.test('passwd: both passwords from stdin; a wrong current password exits 4, a bad input 2, nothing changed', async (t) => {
  const s = await service(t)
  const erin = { username: 'erin', password: 'erin the first' }
  t.equal((await apiAs(s.app, s.admin)('POST', '/api/v1/users', { ...erin, role: 'operator' })).statusCode, 201)
  const token = await loginToken(s.app, erin)

  const [wrong, oneLine, short] = await Promise.all([
    cli(s, ['passwd', '--password-stdin'], { token, stdin: 'not her password\nerin the second\n' }),
    cli(s, ['passwd', '--password-stdin'], { token, stdin: 'erin the first\n' }),
    cli(s, ['users', 'passwd', '--password-stdin'], { token, stdin: 'erin the first\nshort\n' })
  ])
  t.equal(wrong.code, 4, 'a wrong current password')
  t.match(wrong.stderr, 'The current password is wrong')
  t.equal(oneLine.code, 2)
  t.match(oneLine.stderr, 'expected two lines on stdin')
  t.equal(short.code, 2)
  t.match(short.stderr, 'too short')
  t.ok(await logsIn(s.app, erin.username, erin.password), 'the password is unchanged')

  const changed = await cli(s, ['--json', 'passwd', '--password-stdin'], { token, stdin: 'erin the first\nerin the second\n' })
  t.equal(changed.code, 0, changed.stderr)
  t.match(JSON.parse(changed.stdout), { message: /Password changed/ })
  t.ok(await logsIn(s.app, erin.username, 'erin the second'), 'the new password logs in')
  t.notOk(await logsIn(s.app, erin.username, erin.password), 'the old one no longer does')
  const after = await cli(s, ['tokens', 'list'], { token })
  t.equal(after.code, 4, 'the session that changed it has ended')
})

t.test('tokens: create prints the token alone, list, revoke; an API token cannot create one and is told how to', async (t) => {
  const s = await service(t)
  const created = await cli(s, ['tokens', 'create', 'nightly export', '--expires-in', '90d'])
  t.equal(created.code, 0, created.stderr)
  t.match(created.stdout, API_TOKEN, 'the token alone on stdout')
  const id = /id ([0-9a-f-]{36}), expires (\S+)\. The token follows, shown this once/.exec(created.stderr)
  t.ok(id, `the id and expiry on stderr: ${created.stderr}`)
  const expires = Date.parse(id?.[2] ?? '')
  t.ok(Math.abs(expires - (Date.now() + 90 * 86_400_000)) < 600_000, 'it expires in 90 days')
  const token = created.stdout.trim()
  t.equal((await s.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: { 'x-service-token': token } })).json().kind, 'token', 'the token works')

  const json = JSON.parse((await cli(s, ['--json', 'tokens', 'create', 'forever'])).stdout)
  t.match(json, { name: 'forever', token: /^reaktor_pat_/, expiresAt: null })

  const refused = await cli(s, ['tokens', 'create', 'minted'], { token })
  t.equal(refused.code, 4)
  t.equal(refused.stdout, '')
  t.match(refused.stderr, /needs a login session.*"reaktor login" signs in with your password/)
  t.match(refused.stderr, 'REAKTOR_TOKEN')

  const list = await cli(s, ['tokens', 'list'], { token })
  t.equal(list.code, 0, list.stderr)
  const lines = list.stdout.trimEnd().split('\n')
  t.match(lines[0], /^ID\s+NAME\s+OWNER\s+CREATED\s+LAST USED\s+EXPIRES$/)
  t.equal(lines.length, 3, 'a header and two tokens')
  t.match(lines[1], new RegExp(`^${id?.[1] ?? 'no id'}\\s+nightly export\\s+alice\\s+\\S+\\s+\\S+\\s+${id?.[2] ?? ''}$`))
  t.match(lines[2], /^\S+\s+forever\s+alice\s+\S+\s+never\s+never$/)
  const listJson = JSON.parse((await cli(s, ['--json', 'tokens', 'list'])).stdout)
  t.same(listJson.tokens.map((x: { name: string }) => x.name), ['nightly export', 'forever'])
  t.notMatch(JSON.stringify(listJson), 'reaktor_pat_', 'never the tokens themselves')

  const revoked = await cli(s, ['tokens', 'revoke', id?.[1] ?? ''], { token })
  t.equal(revoked.code, 0, revoked.stderr)
  t.equal(revoked.stdout, `API token ${id?.[1] ?? ''} revoked\n`)
  t.same(JSON.parse((await cli(s, ['--json', 'tokens', 'revoke', json.id])).stdout), { message: `API token ${String(json.id)} revoked` })
  t.equal((await cli(s, ['tokens', 'revoke', id?.[1] ?? ''])).code, 3, 'a revoked token is unknown')
})

t.test('audit: the table, its filters, and the next page from the hint on stderr', async (t) => {
  const s = await service(t)
  const admin = apiAs(s.app, s.admin)
  for (const name of ['frank', 'grace']) t.equal((await admin('POST', '/api/v1/users', { username: name, role: 'operator' })).statusCode, 201)

  const first = await cli(s, ['audit', '--action', 'user.create', '--limit', '1'])
  t.equal(first.code, 0, first.stderr)
  const lines = first.stdout.trimEnd().split('\n')
  t.match(lines[0], /^AT\s+ACTION\s+ACTOR\s+ADDRESS\s+TARGETS\s+DETAILS$/)
  t.equal(lines.length, 2, 'one entry')
  t.match(lines[1], /^\S+\s+user\.create\s+alice\s+127\.0\.0\.1\s+grace\s+\{.*"role":"operator".*\}$/, 'the newest first')
  const hint = /^older entries: reaktor (.+)$/m.exec(first.stderr)
  t.ok(hint, `a next-page hint on stderr: ${first.stderr}`)
  const next = hint?.[1].split(' ') ?? []
  t.same(next.slice(0, 5), ['audit', '--action', 'user.create', '--limit', '1'], 'with the same filters')
  const second = await cli(s, next)
  t.equal(second.code, 0, second.stderr)
  t.match(second.stdout.trimEnd().split('\n')[1], /user\.create\s+alice\s+\S+\s+frank\s/, 'the next older entry')

  const json = JSON.parse((await cli(s, ['--json', 'audit', '--actor', 'ALICE'])).stdout)
  t.ok(json.entries.length >= 3, 'the login and the two creates')
  t.ok(json.entries.every((e: { actor: string }) => e.actor === 'alice'), 'only alice\'s')
  t.equal(json.nextBefore, null, 'one page')
  t.same(Object.keys(json.entries[0]).sort(), ['action', 'actor', 'address', 'at', 'details', 'id', 'node', 'targets'])
})

/** A stand-in terminal: each time the command starts reading (a prompt), the next of `lines` is typed. */
function terminal (...lines: string[]): { io: CliIo, stdout: () => string, stderr: () => string } {
  const stdin = Object.assign(new PassThrough(), { isTTY: true, setRawMode: () => stdin })
  let out = ''
  let err = ''
  stdin.on('resume', () => {
    const line = lines.shift()
    if (line !== undefined) stdin.write(`${line}\r`)
  })
  return {
    io: { env: {}, stdin, stdout: { write: (text: string) => { out += text } }, stderr: { write: (text: string) => { err += text } } },
    stdout: () => out,
    stderr: () => err
  }
}

t.test('at a terminal: delete asks first, passwd prompts twice for the new password', async (t) => {
  const s = await service(t)
  t.equal((await apiAs(s.app, s.admin)('POST', '/api/v1/users', { username: 'heidi', role: 'operator' })).statusCode, 201)
  t.equal((await apiAs(s.app, s.admin)('POST', '/api/v1/users', { username: 'ivan', role: 'operator', password: 'ivan the first' })).statusCode, 201)
  const env = { REAKTOR_URL: s.base, REAKTOR_TOKEN: s.admin, XDG_CONFIG_HOME: s.home }

  const no = terminal('n')
  t.equal(await main(['users', 'delete', 'heidi'], { ...no.io, env }), 1, 'no: not deleted')
  t.match(no.stderr(), 'Delete user "heidi" with its sessions and API tokens? [y/N] ')
  t.equal((await userOf(s, 'heidi')).statusCode, 200)
  const yes = terminal('y')
  t.equal(await main(['users', 'delete', 'heidi'], { ...yes.io, env }), 0, yes.stderr())
  t.equal(yes.stdout(), 'User "heidi" deleted\n')
  t.equal((await userOf(s, 'heidi')).statusCode, 404)

  const ivan = await loginToken(s.app, { username: 'ivan', password: 'ivan the first' })
  const differ = terminal('ivan the first', 'ivan the second', 'ivan the 2nd')
  t.equal(await main(['passwd'], { ...differ.io, env: { ...env, REAKTOR_TOKEN: ivan } }), 2)
  t.match(differ.stderr(), /Current password: \nNew password: \nNew password again: \n/, 'three prompts, nothing echoed')
  t.match(differ.stderr(), 'the two new passwords differ')
  const same = terminal('ivan the first', 'ivan the second', 'ivan the second')
  t.equal(await main(['passwd'], { ...same.io, env: { ...env, REAKTOR_TOKEN: ivan } }), 0, same.stderr())
  t.ok(await logsIn(s.app, 'ivan', 'ivan the second'))
})
