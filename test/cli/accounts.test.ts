/**
 * `reaktor users …` and `reaktor passwd` against a listening service, with the token in
 * REAKTOR_TOKEN: `main` in this process (a process each would cost a second or more), one command of
 * each test as a subprocess, as `npx reaktor` runs it. What a terminal is needed for (the delete
 * confirmation, the password prompts) runs `main` with a stand-in terminal.
 */
import t from 'tap'
import { main } from '../../src/cli/main.js'
import { apiAs, loginToken } from '../helpers/auth.js'
import { terminal } from '../helpers/cli.js'
import { cliService } from '../helpers/cli-service.js'

const GENERATED_PASSWORD = /^[A-Za-z0-9_-]{24}\n$/

t.test('users: create, list, show, set-role, disable, enable, reset-password and delete, as tables and as --json', async (t) => {
  const s = await cliService(t)
  t.equal((await apiAs(s.app, s.admin)('POST', '/api/v1/users', { username: 'dan', role: 'operator' })).statusCode, 201)
  // Commands on different users run together.
  const chosen = 'carol chose this one'
  const [created, carol] = await Promise.all([
    s.cli(['users', 'create', 'bob']),
    s.inProcess(['--json', 'users', 'create', 'carol', '--role', 'admin', '--password-stdin'], { stdin: `${chosen}\n` })
  ])
  t.equal(created.code, 0, created.stderr)
  t.match(created.stdout, GENERATED_PASSWORD, 'the generated password alone on stdout')
  t.match(created.stderr, 'User "bob" (operator) created; the generated password follows, shown this once')
  t.notMatch(created.stderr, created.stdout.trim(), 'the password is not on stderr')
  t.ok(await s.logsIn('bob', created.stdout.trim()), 'the printed password logs bob in')
  t.equal(carol.code, 0, carol.stderr)
  const carolJson = JSON.parse(carol.stdout)
  t.match(carolJson, { user: { username: 'carol', role: 'admin', disabled: false } }, '--json: the API answer')
  t.notOk('password' in carolJson, 'no password in the answer when it was given')
  t.ok(await s.logsIn('carol', chosen), 'the password from stdin, without its line break, logs carol in')

  const [list, listJson, shown] = await Promise.all([s.inProcess(['users', 'list']), s.inProcess(['--json', 'users', 'list']), s.inProcess(['users', 'show', 'BOB'])])
  t.equal(list.code, 0, list.stderr)
  const lines = list.stdout.trimEnd().split('\n')
  t.match(lines[0], /^USERNAME\s+ROLE\s+STATUS\s+CREATED\s+UPDATED$/)
  t.same(lines.slice(1).map((l) => l.split(/\s+/).slice(0, 3)), [['alice', 'admin', 'enabled'], ['bob', 'operator', 'enabled'], ['carol', 'admin', 'enabled'], ['dan', 'operator', 'enabled']])
  t.same(JSON.parse(listJson.stdout).users.map((u: { username: string }) => u.username), ['alice', 'bob', 'carol', 'dan'])
  t.equal(shown.code, 0, shown.stderr)
  t.match(shown.stdout, /^username: +bob\nrole: +operator\nstatus: +enabled\nid: +\d+\ncreated: +\S+\nupdated: +\S+\n$/, 'the user, found without regard to case')

  const [promoted, disabled] = await Promise.all([s.inProcess(['users', 'set-role', 'bob', 'admin']), s.inProcess(['users', 'disable', 'dan'])])
  t.match(promoted.stdout, /^role: +admin$/m)
  t.equal((await s.user('bob')).body.role, 'admin', 'the service has the new role')
  t.match(disabled.stdout, /^status: +disabled$/m)
  t.equal((await s.user('dan')).body.disabled, true)
  const enabled = await s.inProcess(['--json', 'users', 'enable', 'dan'])
  t.match(JSON.parse(enabled.stdout), { username: 'dan', role: 'operator', disabled: false })
  t.equal((await s.user('dan')).body.disabled, false)

  const [reset, resetJson, resetStdin] = await Promise.all([
    s.inProcess(['users', 'reset-password', 'bob']),
    s.inProcess(['--json', 'users', 'reset-password', 'carol']),
    s.inProcess(['users', 'reset-password', 'dan', '--password-stdin'], { stdin: 'dan gets this one\n' })
  ])
  t.equal(reset.code, 0, reset.stderr)
  t.match(reset.stdout, GENERATED_PASSWORD, 'the generated password alone on stdout')
  t.match(reset.stderr, 'The password of user "bob" is reset')
  t.ok(await s.logsIn('bob', reset.stdout.trim()), 'the reset password logs bob in')
  const carolReset = JSON.parse(resetJson.stdout)
  t.match(carolReset, { user: { username: 'carol' }, password: /^[A-Za-z0-9_-]{24}$/ })
  t.ok(await s.logsIn('carol', carolReset.password))
  t.equal(resetStdin.code, 0, resetStdin.stderr)
  t.match(resetStdin.stdout, /^username: +dan$/m, 'the user on stdout, no password')
  t.ok(await s.logsIn('dan', 'dan gets this one'))

  const [unconfirmed, carolDeleted] = await Promise.all([s.inProcess(['users', 'delete', 'bob']), s.inProcess(['--json', 'users', 'delete', 'carol', '--yes'])])
  t.equal(unconfirmed.code, 2, 'without a terminal, delete needs --yes')
  t.match(unconfirmed.stderr, 'add --yes to confirm')
  t.equal((await s.user('bob')).statusCode, 200, 'bob is still there')
  t.same(JSON.parse(carolDeleted.stdout), { message: 'User "carol" deleted' })
  const deleted = await s.inProcess(['users', 'delete', 'bob', '--yes'])
  t.equal(deleted.code, 0, deleted.stderr)
  t.equal(deleted.stdout, 'User "bob" deleted\n')
  t.equal((await s.user('bob')).statusCode, 404)
})

t.test('passwd: both passwords from stdin; a wrong current password exits 4, a bad input 2, nothing changed', async (t) => {
  const s = await cliService(t)
  const erin = { username: 'erin', password: 'erin the first' }
  t.equal((await apiAs(s.app, s.admin)('POST', '/api/v1/users', { ...erin, role: 'operator' })).statusCode, 201)
  const token = await loginToken(s.app, erin)

  const [wrong, oneLine, short] = await Promise.all([
    s.cli(['passwd', '--password-stdin'], { token, stdin: 'not her password\nerin the second\n' }),
    s.inProcess(['passwd', '--password-stdin'], { token, stdin: 'erin the first\n' }),
    s.inProcess(['users', 'passwd', '--password-stdin'], { token, stdin: 'erin the first\nshort\n' })
  ])
  t.equal(wrong.code, 4, 'a wrong current password')
  t.match(wrong.stderr, 'The current password is wrong')
  t.equal(oneLine.code, 2)
  t.match(oneLine.stderr, 'expected two lines on stdin')
  t.equal(short.code, 2)
  t.match(short.stderr, 'too short')
  t.ok(await s.logsIn(erin.username, erin.password), 'the password is unchanged')

  const changed = await s.inProcess(['--json', 'passwd', '--password-stdin'], { token, stdin: 'erin the first\nerin the second\n' })
  t.equal(changed.code, 0, changed.stderr)
  t.match(JSON.parse(changed.stdout), { message: /Password changed/ })
  t.ok(await s.logsIn(erin.username, 'erin the second'), 'the new password logs in')
  t.notOk(await s.logsIn(erin.username, erin.password), 'the old one no longer does')
  const after = await s.inProcess(['tokens', 'list'], { token })
  t.equal(after.code, 4, 'the session that changed it has ended')
})

t.test('at a terminal: delete asks first, passwd prompts twice for the new password', async (t) => {
  const s = await cliService(t)
  t.equal((await apiAs(s.app, s.admin)('POST', '/api/v1/users', { username: 'heidi', role: 'operator' })).statusCode, 201)
  t.equal((await apiAs(s.app, s.admin)('POST', '/api/v1/users', { username: 'ivan', role: 'operator', password: 'ivan the first' })).statusCode, 201)
  const env = { REAKTOR_URL: s.base, REAKTOR_TOKEN: s.admin, XDG_CONFIG_HOME: s.home }

  const no = terminal({}, 'n')
  t.equal(await main(['users', 'delete', 'heidi'], { ...no.io, env }), 1, 'no: not deleted')
  t.match(no.stderr(), 'Delete user "heidi" with its sessions and API tokens? [y/N] ')
  t.equal((await s.user('heidi')).statusCode, 200)
  const yes = terminal({}, 'y')
  t.equal(await main(['users', 'delete', 'heidi'], { ...yes.io, env }), 0, yes.stderr())
  t.equal(yes.stdout(), 'User "heidi" deleted\n')
  t.equal((await s.user('heidi')).statusCode, 404)

  const ivan = await loginToken(s.app, { username: 'ivan', password: 'ivan the first' })
  const differ = terminal({}, 'ivan the first', 'ivan the second', 'ivan the 2nd')
  t.equal(await main(['passwd'], { ...differ.io, env: { ...env, REAKTOR_TOKEN: ivan } }), 2)
  t.match(differ.stderr(), /Current password: \nNew password: \nNew password again: \n/, 'three prompts, nothing echoed')
  t.match(differ.stderr(), 'the two new passwords differ')
  const same = terminal({}, 'ivan the first', 'ivan the second', 'ivan the second')
  t.equal(await main(['passwd'], { ...same.io, env: { ...env, REAKTOR_TOKEN: ivan } }), 0, same.stderr())
  t.ok(await s.logsIn('ivan', 'ivan the second'))
})
