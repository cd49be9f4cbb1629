/**
 * `reaktor tokens …`, `reaktor audit`, and the exit codes every API command shares: the command
 * itself (a subprocess, as `npx reaktor` runs it) against a listening service; the many short
 * exit code checks in this process, a few of them as a process too.
 */
import t from 'tap'
import { ADMIN, apiAs, loginToken } from '../helpers/auth.js'
import { cliService } from '../helpers/cli-service.js'

const API_TOKEN = /^reaktor_pat_[A-Za-z0-9_-]{43}\n$/

t.test('exit codes: 3 for an unknown user or token, 4 for an operator on an admin command or no token, 2 for bad arguments', async (t) => {
  const s = await cliService(t)
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
    [['tokens', 'create', 'x', '--expires-in', '1s'], 2, /1m|expiresIn/],
    // An id longer than a URL path segment may be (the service answers 414): a bad argument too.
    [['polling', 'status', 'x'.repeat(1100)], 2, /exceeding the max param length/],
    // "." and "..": a URL would resolve them away and reach another route (the bulk start, the API root).
    [['polling', 'start', '.'], 2, /"\." and "\.\." cannot be sent as an id or a name/],
    [['users', 'delete', '..', '--yes'], 2, /username: not "\." or "\.\.", which a URL path cannot carry/],
    [['tokens', 'revoke', '..'], 2, /"\." and "\.\." cannot be sent as an id or a name/],
    // A conflict (409): a failure, not a usage error.
    [['users', 'disable', ADMIN.username], 1, /last enabled admin/]
  ]
  const results = await Promise.all(cases.map(async ([args, , , opts]) => await s.inProcess(args, opts)))
  cases.forEach(([args, code, message], i) => {
    t.equal(results[i].code, code, `reaktor ${args.join(' ')} exits ${code}`)
    t.match(results[i].stderr, message, `reaktor ${args.join(' ')}: ${results[i].stderr.trim()}`)
    t.equal(results[i].stdout, '', 'nothing on stdout')
  })
  // The process exits with the code main returns: one of each, as a process.
  for (const i of [0, 4, 9]) {
    const [args, code, , opts] = cases[i]
    t.equal((await s.cli(args, opts)).code, code, `the process of reaktor ${args.join(' ')} exits ${code}`)
  }
  t.equal((await s.user('erin')).statusCode, 404, 'no bad argument created a user')
  t.equal((await s.user('dave')).body.role, 'operator', 'nor changed one')
})

t.test('tokens: create prints the token alone, list, revoke; an API token cannot create one and is told how to', async (t) => {
  const s = await cliService(t)
  const created = await s.cli(['tokens', 'create', 'nightly export', '--expires-in', '90d'])
  t.equal(created.code, 0, created.stderr)
  t.match(created.stdout, API_TOKEN, 'the token alone on stdout')
  const id = /id ([0-9a-f-]{36}), expires (\S+)\. The token follows, shown this once/.exec(created.stderr)
  t.ok(id, `the id and expiry on stderr: ${created.stderr}`)
  const expires = Date.parse(id?.[2] ?? '')
  t.ok(Math.abs(expires - (Date.now() + 90 * 86_400_000)) < 600_000, 'it expires in 90 days')
  const token = created.stdout.trim()
  t.equal((await s.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: { 'x-service-token': token } })).json().kind, 'token', 'the token works')

  const json = JSON.parse((await s.cli(['--json', 'tokens', 'create', 'forever'])).stdout)
  t.match(json, { name: 'forever', token: /^reaktor_pat_/, expiresAt: null })

  const refused = await s.cli(['tokens', 'create', 'minted'], { token })
  t.equal(refused.code, 4)
  t.equal(refused.stdout, '')
  t.match(refused.stderr, /needs a login session.*"reaktor login" signs in with your password/)
  t.match(refused.stderr, 'REAKTOR_TOKEN')

  const list = await s.cli(['tokens', 'list'], { token })
  t.equal(list.code, 0, list.stderr)
  const lines = list.stdout.trimEnd().split('\n')
  t.match(lines[0], /^ID\s+NAME\s+OWNER\s+CREATED\s+LAST USED\s+EXPIRES$/)
  t.equal(lines.length, 3, 'a header and two tokens')
  t.match(lines[1], new RegExp(`^${id?.[1] ?? 'no id'}\\s+nightly export\\s+alice\\s+\\S+\\s+\\S+\\s+${id?.[2] ?? ''}$`))
  t.match(lines[2], /^\S+\s+forever\s+alice\s+\S+\s+never\s+never$/)
  const listJson = JSON.parse((await s.cli(['--json', 'tokens', 'list'])).stdout)
  t.same(listJson.tokens.map((x: { name: string }) => x.name), ['nightly export', 'forever'])
  t.notMatch(JSON.stringify(listJson), 'reaktor_pat_', 'never the tokens themselves')

  const revoked = await s.cli(['tokens', 'revoke', id?.[1] ?? ''], { token })
  t.equal(revoked.code, 0, revoked.stderr)
  t.equal(revoked.stdout, `API token ${id?.[1] ?? ''} revoked\n`)
  t.same(JSON.parse((await s.cli(['--json', 'tokens', 'revoke', json.id])).stdout), { message: `API token ${String(json.id)} revoked` })
  t.equal((await s.cli(['tokens', 'revoke', id?.[1] ?? ''])).code, 3, 'a revoked token is unknown')
})

t.test('audit: the table, its filters, and the next page from the hint on stderr', async (t) => {
  const s = await cliService(t)
  const admin = apiAs(s.app, s.admin)
  for (const name of ['frank', 'grace']) t.equal((await admin('POST', '/api/v1/users', { username: name, role: 'operator' })).statusCode, 201)

  const first = await s.cli(['audit', '--action', 'user.create', '--limit', '1'])
  t.equal(first.code, 0, first.stderr)
  const lines = first.stdout.trimEnd().split('\n')
  t.match(lines[0], /^AT\s+ACTION\s+ACTOR\s+ADDRESS\s+TARGETS\s+DETAILS$/)
  t.equal(lines.length, 2, 'one entry')
  t.match(lines[1], /^\S+\s+user\.create\s+alice\s+127\.0\.0\.1\s+grace\s+\{.*"role":"operator".*\}$/, 'the newest first')
  const hint = /^older entries: reaktor (.+)$/m.exec(first.stderr)
  t.ok(hint, `a next-page hint on stderr: ${first.stderr}`)
  const next = hint?.[1].split(' ') ?? []
  t.same(next.slice(0, 5), ['audit', '--action', 'user.create', '--limit', '1'], 'with the same filters')
  const second = await s.cli(next)
  t.equal(second.code, 0, second.stderr)
  t.match(second.stdout.trimEnd().split('\n')[1], /user\.create\s+alice\s+\S+\s+frank\s/, 'the next older entry')

  const json = JSON.parse((await s.cli(['--json', 'audit', '--actor', 'ALICE'])).stdout)
  t.ok(json.entries.length >= 3, 'the login and the two creates')
  t.ok(json.entries.every((e: { actor: string }) => e.actor === 'alice'), 'only alice\'s')
  t.equal(json.nextBefore, null, 'one page')
  t.same(Object.keys(json.entries[0]).sort(), ['action', 'actor', 'address', 'at', 'details', 'id', 'node', 'targets'])
})

