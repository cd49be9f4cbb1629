/**
 * `reaktor login`, `whoami` and `logout`, mostly as a subprocess, against a listening service: the stored
 * token (owner-only, no password, for its own URL only), the login session ended at once,
 * REAKTOR_TOKEN over the stored login, revocation at logout, and the exit codes.
 */
import fs from 'node:fs/promises'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import type { AddressInfo } from 'node:net'
import { PassThrough } from 'node:stream'
import t from 'tap'
import { ADMIN, ADMIN_ENV, apiAs, loginToken, tokenHeader } from '../helpers/auth.js'
import { listeningApp } from '../helpers/browser.js'
import { cliHome, runCli, runCliInProcess } from '../helpers/cli.js'
import { deadline } from '../helpers/timing.js'
import { main } from '../../src/cli/main.js'

const BOB = { username: 'bob', password: 'bob has a long password' }

/** A port nothing listens on: bound, then closed. */
async function closedPort (): Promise<number> {
  const server = http.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

t.test('login, whoami, REAKTOR_TOKEN, another URL, logout', async (t) => {
  const { app, base } = await listeningApp(t, { env: ADMIN_ENV })
  const admin = apiAs(app, await loginToken(app))
  t.equal((await admin('POST', '/api/v1/users', { username: BOB.username, role: 'operator', password: BOB.password })).statusCode, 201)
  const sessionsOf = async (username: string): Promise<number> => Number((await app.db.selectFrom('sessions').innerJoin('users', 'users.id', 'sessions.user_id')
    .where('users.username', '=', username).where('sessions.revoked_at', 'is', null).select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow()).n)
  const aliceSessionsBefore = await sessionsOf(ADMIN.username)

  const home = await cliHome(t)
  const file = path.join(home, 'reaktor', 'credentials.json')
  let res = await runCli(['login', '--username', ADMIN.username, '--password-stdin'], { env: { XDG_CONFIG_HOME: home, REAKTOR_URL: base }, stdin: `${ADMIN.password}\n` })
  t.equal(res.code, 0, res.stderr)
  t.match(res.stdout, `Logged in to ${base} as alice (admin)`)
  t.match(res.stdout, file, 'says where the token is stored')
  t.equal((await fs.stat(file)).mode & 0o777, 0o600, 'the file is owner-only')
  t.equal((await fs.stat(path.dirname(file))).mode & 0o777, 0o700, 'its folder too')
  const text = await fs.readFile(file, 'utf8')
  let stored = JSON.parse(text)
  t.same(Object.keys(stored).sort(), ['token', 'tokenId', 'url', 'username'])
  t.match(stored, { url: base, username: 'alice', token: /^reaktor_pat_[A-Za-z0-9_-]{43}$/ })
  t.notMatch(text, ADMIN.password, 'no password in the file')
  t.notMatch(res.stdout + res.stderr, stored.token, 'the token is never printed')
  t.notMatch(res.stdout + res.stderr, ADMIN.password)
  const tokens = (await admin('GET', '/api/v1/tokens')).body.tokens
  t.same(tokens.map((tk: any) => [tk.id, tk.name, tk.owner]), [[stored.tokenId, `reaktor CLI on ${os.hostname()}`, 'alice']])
  const days = (Date.parse(tokens[0].expiresAt) - Date.parse(tokens[0].createdAt)) / 86_400_000
  t.ok(Math.abs(days - 90) < 0.01, `expires in 90 days by default (${days})`)
  t.equal(await sessionsOf(ADMIN.username), aliceSessionsBefore, 'the login session was ended: only the API token stays')

  // A second user, in a config home of its own, with a shorter token.
  const bobHome = await cliHome(t)
  res = await runCli(['--json', 'login', '--username', 'BOB', '--password-stdin', '--expires-in', '1d'], { env: { XDG_CONFIG_HOME: bobHome, REAKTOR_URL: base }, stdin: BOB.password })
  t.equal(res.code, 0, res.stderr)
  const bobLogin = JSON.parse(res.stdout)
  t.match(bobLogin, { url: base, username: 'bob', tokenId: String, credentialsFile: path.join(bobHome, 'reaktor', 'credentials.json') }, 'the username as the service spells it')
  t.notOk('token' in bobLogin)
  t.ok(Math.abs(Date.parse(bobLogin.expiresAt) - Date.now() - 86_400_000) < 60_000, '--expires-in 1d')
  const bobToken = JSON.parse(await fs.readFile(bobLogin.credentialsFile, 'utf8')).token as string

  // whoami finds the service through the stored login; REAKTOR_TOKEN wins over it.
  const [mine, mineJson, asBob] = await Promise.all([
    runCli(['whoami'], { env: { XDG_CONFIG_HOME: home } }),
    runCliInProcess(['whoami', '--json'], { env: { XDG_CONFIG_HOME: home } }),
    runCliInProcess(['whoami', '--json'], { env: { XDG_CONFIG_HOME: home, REAKTOR_TOKEN: bobToken } })
  ])
  t.equal(mine.code, 0, mine.stderr)
  t.match(mine.stdout, /username:\s+alice\n/)
  t.match(mine.stdout, /role:\s+admin\n/)
  t.match(mine.stdout, new RegExp(`credential:\\s+API token ${stored.tokenId}\\n`))
  t.equal(mineJson.code, 0, mineJson.stderr)
  t.same(JSON.parse(mineJson.stdout), (await apiAs(app, stored.token)('GET', '/api/v1/auth/me')).body, '--json is the API answer')
  t.match(JSON.parse(asBob.stdout), { username: 'bob', role: 'operator', kind: 'token' }, 'REAKTOR_TOKEN overrides the stored login')

  // Logging in again replaces the stored login and revokes the token it held.
  res = await runCli(['login', '--username', ADMIN.username, '--password-stdin', '--expires-in', 'never'], { env: { XDG_CONFIG_HOME: home }, stdin: ADMIN.password })
  t.equal(res.code, 0, res.stderr)
  const replaced = stored
  stored = JSON.parse(await fs.readFile(file, 'utf8'))
  t.not(stored.tokenId, replaced.tokenId, 'a new token, at the stored URL')
  t.equal((await app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: tokenHeader(replaced.token) })).statusCode, 401, 'the replaced token is revoked')
  t.same((await admin('GET', '/api/v1/tokens')).body.tokens.filter((tk: any) => tk.owner === 'alice').map((tk: any) => [tk.id, tk.expiresAt]), [[stored.tokenId, null]], 'one CLI token of alice is left, never expiring (--expires-in never)')
  t.match(res.stdout, 'never expires')

  // The stored token goes to its own service only: another --url gets no token at all.
  const seen: Array<string | undefined> = []
  const other = http.createServer((req, reply) => {
    seen.push(req.headers['x-service-token'] as string | undefined)
    reply.writeHead(401, { 'content-type': 'application/json' }).end('{"statusCode":401,"error":"Unauthorized","message":"no"}')
  })
  await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve))
  t.teardown(() => other.close())
  res = await runCli(['whoami', '--url', `http://127.0.0.1:${(other.address() as AddressInfo).port}`], { env: { XDG_CONFIG_HOME: home } })
  t.equal(res.code, 4, 'not logged in there')
  t.match(res.stderr, 'not logged in to http://127.0.0.1:')
  t.same(seen, [], 'the other service received nothing')

  // logout revokes the token on the service and removes the file.
  res = await runCli(['logout'], { env: { XDG_CONFIG_HOME: home } })
  t.equal(res.code, 0, res.stderr)
  t.match(res.stdout, `token ${stored.tokenId} revoked`)
  await t.rejects(fs.stat(file), { code: 'ENOENT' })
  t.equal((await app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: tokenHeader(stored.token) })).statusCode, 401, 'the old token is refused')
  res = await runCli(['logout'], { env: { XDG_CONFIG_HOME: home } })
  t.same([res.code, res.stdout], [0, ''], 'not logged in: nothing to do')
  t.match(res.stderr, 'not logged in')
  res = await runCli(['whoami'], { env: { XDG_CONFIG_HOME: home, REAKTOR_URL: base } })
  t.equal(res.code, 4, 'whoami without a login')

  // A token the service no longer knows (revoked elsewhere): logout still removes the file, and says so.
  t.equal((await admin('DELETE', `/api/v1/tokens/${bobLogin.tokenId}`)).statusCode, 200)
  res = await runCli(['logout'], { env: { XDG_CONFIG_HOME: bobHome } })
  t.equal(res.code, 0, res.stderr)
  t.match(res.stdout, 'the service no longer knew token')
  await t.rejects(fs.stat(bobLogin.credentialsFile), { code: 'ENOENT' })

  // --json: what was logged out of, and whether the service still knew the token.
  res = await runCli(['--json', 'login', '--username', 'bob', '--password-stdin'], { env: { XDG_CONFIG_HOME: bobHome, REAKTOR_URL: base }, stdin: BOB.password })
  t.equal(res.code, 0, res.stderr)
  const again = JSON.parse(res.stdout)
  res = await runCli(['logout', '--json'], { env: { XDG_CONFIG_HOME: bobHome } })
  t.equal(res.code, 0, res.stderr)
  t.same(JSON.parse(res.stdout), { url: base, username: 'bob', tokenId: again.tokenId, revoked: true }, 'logout --json, as docs/cli.md documents it')
})

t.test('login failures: wrong password 4, unreachable 1, a refused expiry 1 with no session left, usage 2', async (t) => {
  const { app, base } = await listeningApp(t, { env: ADMIN_ENV })
  const home = await cliHome(t)
  const env = { XDG_CONFIG_HOME: home, REAKTOR_URL: base }
  const file = path.join(home, 'reaktor', 'credentials.json')
  const port = await closedPort()
  // Two as processes, the others in this process (a process start each would cost a second or more).
  const [wrong, unreachable, expiry, noUser, noTty, badUrl, badDuration, noName] = await Promise.all([
    runCli(['login', '--username', ADMIN.username, '--password-stdin'], { env, stdin: 'not the password' }),
    runCliInProcess(['login', '--username', ADMIN.username, '--password-stdin', '--url', `http://127.0.0.1:${port}`], { env, stdin: ADMIN.password }),
    runCliInProcess(['login', '--username', ADMIN.username, '--password-stdin', '--expires-in', '5s'], { env, stdin: ADMIN.password }),
    runCliInProcess(['login', '--password-stdin'], { env, stdin: ADMIN.password }),
    runCliInProcess(['login', '--username', ADMIN.username], { env }),
    runCliInProcess(['login', '--username', ADMIN.username, '--password-stdin', '--url', 'ftp://example.org'], { env, stdin: ADMIN.password }),
    runCli(['login', '--username', ADMIN.username, '--password-stdin', '--expires-in', 'soon'], { env, stdin: ADMIN.password }),
    runCliInProcess(['login'], { env })
  ])
  t.equal(wrong.code, 4, 'a wrong password')
  t.match(wrong.stderr, /^reaktor: Invalid username or password\n$/, "the service's message, no login hint")
  t.equal(unreachable.code, 1, 'unreachable')
  t.match(unreachable.stderr, `cannot reach http://127.0.0.1:${port}: ECONNREFUSED`)
  t.equal(expiry.code, 2, 'an expiry the API refuses (400): a bad argument')
  t.match(expiry.stderr, 'expiresIn')
  t.equal(noUser.code, 2, '--password-stdin without --username')
  t.equal(noTty.code, 2, 'no terminal to ask the password on')
  t.match(noTty.stderr, '--password-stdin')
  t.equal(noName.code, 2, 'no terminal to ask the username on')
  t.equal(noName.stderr, 'reaktor: Username: no terminal to ask on; give it with --username\n', 'the option that gives the username, not --password-stdin (which needs --username)')
  t.equal(badUrl.code, 2, 'not an http URL')
  t.equal(badDuration.code, 2, 'not a duration')
  t.match(badDuration.stderr, /^error: option '--expires-in <duration>' argument 'soon' is invalid\. a duration such as 30m, 12h or 90d, or "never"\nUsage: reaktor login/)
  await t.rejects(fs.stat(file), { code: 'ENOENT' }, 'nothing stored')
  const left = await app.db.selectFrom('sessions').where('revoked_at', 'is', null).select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow()
  t.equal(Number(left.n), 0, 'the session of the refused expiry was ended too')
  const tokens = await app.db.selectFrom('api_tokens').select('id').execute()
  t.same(tokens, [], 'no token made')

  // A logout that cannot reach the service keeps the stored login: the token is still live there.
  const elsewhere = await cliHome(t)
  const storedFile = path.join(elsewhere, 'reaktor', 'credentials.json')
  await fs.mkdir(path.dirname(storedFile), { mode: 0o700 })
  await fs.writeFile(storedFile, JSON.stringify({ url: `http://127.0.0.1:${port}`, username: 'alice', token: 'reaktor_pat_' + 'x'.repeat(43), tokenId: '6f1c0000-0000-4000-8000-000000000000' }), { mode: 0o600 })
  const res = await runCli(['logout'], { env: { XDG_CONFIG_HOME: elsewhere } })
  t.equal(res.code, 1, 'unreachable')
  t.match(res.stderr, `cannot reach http://127.0.0.1:${port}: ECONNREFUSED; the stored login is kept`)
  t.ok((await fs.stat(storedFile)).isFile(), 'the file is kept')

  // A stored login that is not one (a truncated file): a warning, and REAKTOR_TOKEN or a new login still work.
  const broken = await cliHome(t)
  const brokenFile = path.join(broken, 'reaktor', 'credentials.json')
  await fs.mkdir(path.dirname(brokenFile), { mode: 0o700 })
  await fs.writeFile(brokenFile, '{"url": "http://127.0.0.1:', { mode: 0o600 })
  const withToken = await runCli(['whoami', '--json'], { env: { XDG_CONFIG_HOME: broken, REAKTOR_URL: base, REAKTOR_TOKEN: await loginToken(app) } })
  t.equal(withToken.code, 0, withToken.stderr)
  t.equal(JSON.parse(withToken.stdout).username, ADMIN.username, 'REAKTOR_TOKEN works')
  t.equal(withToken.stderr, '', 'with the URL and the token both given, the stored login is not even read')
  const withoutToken = await runCli(['whoami'], { env: { XDG_CONFIG_HOME: broken, REAKTOR_URL: base } })
  t.equal(withoutToken.code, 4, 'without a token: not logged in')
  t.match(withoutToken.stderr, `reaktor: warning: ${brokenFile} is not a stored login`)
  const relogin = await runCli(['login', '--username', ADMIN.username, '--password-stdin'], { env: { XDG_CONFIG_HOME: broken, REAKTOR_URL: base }, stdin: ADMIN.password })
  t.equal(relogin.code, 0, relogin.stderr)
  t.equal(JSON.parse(await fs.readFile(brokenFile, 'utf8')).username, ADMIN.username, 'a login replaces it')
})

/** `reaktor login` in this process at a fake terminal: `answers` are typed when their question (the key) is written. */
async function terminalLogin (env: Record<string, string>, answers: Map<string, string>): Promise<{ code: number, stdout: string, stderr: string, rawModes: boolean[] }> {
  const rawModes: boolean[] = []
  const stdin = Object.assign(new PassThrough(), { isTTY: true, setRawMode: (mode: boolean) => { rawModes.push(mode) } })
  let stdout = ''
  let stderr = ''
  const io = {
    env,
    stdin,
    stdout: { write: (text: string) => { stdout += text } },
    stderr: {
      write: (text: string) => {
        stderr += text
        const answer = answers.get(text)
        if (answer !== undefined) setImmediate(() => stdin.write(answer))
      }
    }
  }
  // A prompt that lost an answer would wait for ever: fail instead, with what it wrote.
  let timer: NodeJS.Timeout | undefined
  const limit = deadline(15_000)
  const late = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(new Error(`login still waiting after ${limit} ms; stderr: ${JSON.stringify(stderr)}`)), limit) })
  try {
    const code = await Promise.race([main(['login'], io), late])
    return { code, stdout, stderr, rawModes }
  } finally {
    clearTimeout(timer)
  }
}

t.test('login at a terminal: the username echoed, the password not, also when typed ahead', async (t) => {
  const { base } = await listeningApp(t, { env: ADMIN_ENV })
  const home = await cliHome(t)
  const env = { XDG_CONFIG_HOME: home, REAKTOR_URL: base }
  let res = await terminalLogin(env, new Map([['Username: ', `${ADMIN.username}\r`], ['Password: ', `${ADMIN.password}\r`]]))
  t.equal(res.code, 0, res.stderr)
  t.match(res.stdout, `Logged in to ${base} as alice (admin)`)
  t.equal(res.stderr, `Username: ${ADMIN.username}\nPassword: \n`, 'the username echoed, the password not')
  t.same(res.rawModes, [true, false, true, false], 'the terminal is raw only while asking')
  t.match(JSON.parse(await fs.readFile(path.join(home, 'reaktor', 'credentials.json'), 'utf8')), { url: base, username: 'alice' })

  // Both answers in one chunk (pasted, or typed before the second question): the rest is the password.
  res = await terminalLogin(env, new Map([['Username: ', `${ADMIN.username}\r${ADMIN.password}\r`]]))
  t.equal(res.code, 0, res.stderr)
  t.equal(res.stderr, `Username: ${ADMIN.username}\nPassword: \n`)

  // Ctrl-C at the password: cancelled, exit 1, the terminal out of raw mode, nothing stored or asked.
  const cancelledHome = await cliHome(t)
  res = await terminalLogin({ ...env, XDG_CONFIG_HOME: cancelledHome }, new Map([['Username: ', `${ADMIN.username}\r`], ['Password: ', 'half a pass\u0003']]))
  t.equal(res.code, 1)
  t.equal(res.stderr, `Username: ${ADMIN.username}\nPassword: \nreaktor: cancelled\n`)
  t.same(res.rawModes, [true, false, true, false], 'raw mode ended')
  await t.rejects(fs.stat(path.join(cancelledHome, 'reaktor')), { code: 'ENOENT' }, 'nothing stored')
})
