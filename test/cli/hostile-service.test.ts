/**
 * The CLI against a service that answers what it likes: reaktor code writes labels and run errors,
 * so whatever it prints must not drive the operator's terminal; pasted hints must give back the
 * same words; ids must reach the route they name; the token must go nowhere else and never be
 * printed; a huge or non-JSON answer must fail cleanly; and --password-stdin must not read a
 * terminal. A plain node:http server stands in for the service (no database needed).
 */
import { execFile } from 'node:child_process'
import fs from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { PassThrough } from 'node:stream'
import { promisify } from 'node:util'
import t from 'tap'
import { cliHome } from '../helpers/cli.js'
import type { TestContext } from '../helpers/test-context.js'
import { deadline } from '../helpers/timing.js'
import { ApiClient } from '../../src/cli/client.js'
import { main } from '../../src/cli/main.js'

type Handler = (req: http.IncomingMessage, reply: http.ServerResponse) => void

/** A listening fake service; every request's method and raw path is recorded. */
async function fakeService (t: TestContext, handler: Handler): Promise<{ base: string, requests: string[] }> {
  const requests: string[] = []
  const server = http.createServer((req, reply) => {
    requests.push(`${req.method ?? ''} ${req.url ?? ''}`)
    handler(req, reply)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    server.close()
    server.closeAllConnections()
  })
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests }
}

function json (reply: http.ServerResponse, status: number, body: unknown): void {
  reply.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
}

/** A well-formed API token the fake services take. */
const FAKE_TOKEN = 'reaktor_pat_' + 'x'.repeat(43)

/** The CLI's environment against `base` with FAKE_TOKEN, a config home of its own. */
async function cliEnv (t: TestContext, base: string): Promise<Record<string, string>> {
  return { XDG_CONFIG_HOME: await cliHome(t), REAKTOR_URL: base, REAKTOR_TOKEN: FAKE_TOKEN }
}

/** `reaktor <args>` in this process, its stdout a terminal (as when an operator types it). */
async function atTerminal (args: string[], env: Record<string, string>, input = ''): Promise<{ code: number, stdout: string, stderr: string }> {
  let stdout = ''
  let stderr = ''
  const stdin = new PassThrough()
  stdin.end(input)
  const code = await main(args, {
    env,
    stdin,
    stdout: { write: (s: string) => { stdout += s }, isTTY: true },
    stderr: { write: (s: string) => { stderr += s }, isTTY: true }
  })
  return { code, stdout, stderr }
}

// Sets the window title, clears the screen, and reverses the text after it.
const HOSTILE = 'boom\u001b]0;pwned\u0007\u001b[2J\u009b31m\u202etxt.exe'
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/

t.test('control characters and bidi overrides from the service are shown escaped, never written raw', async (t) => {
  const status = {
    reaktorDefinitionId: 'evil',
    app: 'evil-app',
    state: 'running',
    interval: '5s',
    effectiveInterval: '5s',
    lastRun: null,
    nextRun: null,
    updatedAt: null,
    label: HOSTILE,
    description: null,
    autoStart: true,
    lastError: HOSTILE,
    consecutiveFailures: 1,
    blocked: false,
    owner: HOSTILE,
    lastSuccessAt: null,
    lastFailureAt: null,
    lastDurationMs: null,
    lastOutcome: 'failure',
    runningSince: null
  }
  const { base } = await fakeService(t, (req, reply) => {
    if (req.url === '/api/v1/polling') return json(reply, 200, { pollingReaktors: [status] })
    if (req.url === '/api/v1/polling/evil/status') return json(reply, 200, status)
    if (req.url === '/api/v1/polling/evil/run') return json(reply, 200, { message: HOSTILE })
    if (req.url?.startsWith('/api/v1/polling/evil/runs') === true) return json(reply, 200, { runs: [{ runId: 'r', node: HOSTILE, startedAt: new Date().toISOString(), durationMs: 1, outcome: 'failure', error: HOSTILE }], nextBefore: null })
    json(reply, 404, { statusCode: 404, error: 'Not Found', message: HOSTILE })
  })
  const env = await cliEnv(t, base)

  for (const args of [['polling', 'list'], ['polling', 'status', 'evil'], ['polling', 'run', 'evil'], ['polling', 'runs', 'evil'], ['polling', 'status', 'nothing']]) {
    const res = await atTerminal(args, env)
    const printed = res.stdout + res.stderr
    t.notMatch(printed, CONTROL, `${args.join(' ')}: nothing raw`)
    t.match(printed, 'boom\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u202etxt.exe', `${args.join(' ')}: the text shown, escaped`)
  }

  // What the service answers to a login and a new token, printed as messages.
  const TOKEN = { id: HOSTILE, token: 'reaktor_pat_' + 'y'.repeat(43), name: HOSTILE, expiresAt: HOSTILE }
  const { base: accounts } = await fakeService(t, (req, reply) => {
    if (req.url === '/api/v1/auth/login') return json(reply, 200, { token: 'reaktor_session' })
    if (req.url === '/api/v1/tokens') return json(reply, 201, TOKEN)
    if (req.url === '/api/v1/auth/logout') return json(reply, 200, { message: 'bye' })
    if (req.url === '/api/v1/auth/me') return json(reply, 200, { username: HOSTILE, role: HOSTILE, kind: 'token', tokenId: HOSTILE, expiresAt: null })
    json(reply, 404, { statusCode: 404, error: 'Not Found', message: 'no' })
  })
  const accountEnv = { XDG_CONFIG_HOME: await cliHome(t), REAKTOR_URL: accounts }
  for (const [args, input] of [[['tokens', 'create', 'ci'], ''], [['login', '--username', 'alice', '--password-stdin'], 'a password\n']] as const) {
    const res = await atTerminal([...args], { ...accountEnv, REAKTOR_TOKEN: FAKE_TOKEN }, input)
    t.equal(res.code, 0, res.stderr)
    t.notMatch(res.stdout + res.stderr, CONTROL, `${args.join(' ')}: nothing raw`)
    t.match(res.stdout + res.stderr, 'boom\\x1b]0;pwned', `${args.join(' ')}: the text shown, escaped`)
  }

  // --json is for scripts: the values as the service sent them (JSON escapes what it must).
  const res = await atTerminal(['--json', 'polling', 'status', 'evil'], env)
  t.equal(res.code, 0, res.stderr)
  t.equal(JSON.parse(res.stdout).lastError, HOSTILE, '--json: the very value')
  t.notMatch(res.stdout, CONTROL, '--json: nothing raw either (escaped the JSON way)')
})

t.test('an id of "." or ".." never reaches another route; "/", "?" and "#" stay inside the id', async (t) => {
  const { base, requests } = await fakeService(t, (_req, reply) => json(reply, 404, { statusCode: 404, error: 'Not Found', message: 'no such route' }))
  const env = await cliEnv(t, base)
  for (const args of [['polling', 'run', '..'], ['polling', 'status', '.'], ['polling', 'start', '..'], ['tokens', 'revoke', '..'], ['users', 'show', '..']]) {
    const res = await atTerminal(args, env)
    t.equal(res.code, 2, `${args.join(' ')}: a usage error`)
    t.match(res.stderr, /"\." (and|or) "\.\."/)
  }
  t.same(requests, [], 'nothing was sent')

  const res = await atTerminal(['polling', 'status', '../../users/alice?x=1#y'], env)
  t.equal(res.code, 3, res.stderr)
  t.same(requests, ['GET /api/v1/polling/..%2F..%2Fusers%2Falice%3Fx%3D1%23y/status'], 'one path segment')
})

t.test('--password-stdin with stdin a terminal: a usage error at once, not a wait while the password is typed with echo', async (t) => {
  const { base, requests } = await fakeService(t, (_req, reply) => json(reply, 500, { statusCode: 500, error: 'Internal Server Error', message: 'unexpected' }))
  // admin reset-password reaches the database (this URL, which nothing serves) after reading stdin.
  const env = { ...await cliEnv(t, base), DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' }
  for (const args of [['login', '--username', 'alice', '--password-stdin'], ['users', 'create', 'bob', '--password-stdin'], ['admin', 'reset-password', '--password-stdin', 'bob']]) {
    const stdin = Object.assign(new PassThrough(), { isTTY: true, setRawMode: () => undefined })
    t.teardown(() => stdin.destroy())
    let stderr = ''
    const run = main(args, { env, stdin, stdout: { write: () => true, isTTY: true }, stderr: { write: (s: string) => { stderr += s }, isTTY: true } })
    // Nothing is typed: without the check the command would wait for an end of input forever.
    let timer: NodeJS.Timeout | undefined
    const limit = deadline(5000)
    const late = new Promise<string>((resolve) => { timer = setTimeout(() => resolve(`still waiting after ${limit} ms`), limit) })
    const code = await Promise.race([run, late])
    clearTimeout(timer)
    t.equal(code, 2, `${args.join(' ')}: ${stderr}`)
    t.match(stderr, '--password-stdin reads a pipe or a file, and stdin is a terminal')
  }
  t.same(requests, [], 'nothing was sent')
})

t.test('an answer larger than the limit is not read whole, with or without a length', async (t) => {
  const MIB = Buffer.alloc(1024 * 1024, 'x')
  const { base } = await fakeService(t, (req, reply) => {
    // Eight times the client's limit, in 1 MiB writes; once with a length, once chunked.
    reply.writeHead(200, req.url?.endsWith('/sized') === true ? { 'content-type': 'application/json', 'content-length': String(8 * MIB.length) } : { 'content-type': 'application/json' })
    let left = 8
    const more = (): void => {
      while (left > 0) {
        left--
        if (!reply.write(MIB)) return void reply.once('drain', more)
      }
      reply.end()
    }
    reply.on('error', () => undefined)
    more()
  })
  const client = new ApiClient(base, FAKE_TOKEN, 30_000, MIB.length)
  for (const path of ['/polling/sized', '/polling/chunked']) {
    await t.rejects(client.request('GET', path), { exitCode: 1, message: `GET /api/v1${path}: the answer is larger than ${MIB.length} bytes, not read` }, path)
  }
})

t.test('a redirect is not followed: the token stays with the service it was given for', async (t) => {
  const seen: Array<string | undefined> = []
  const other = await fakeService(t, (req, reply) => {
    seen.push(req.headers['x-service-token'] as string | undefined)
    reply.end('{}')
  })
  const { base } = await fakeService(t, (req, reply) => {
    reply.writeHead(req.method === 'POST' ? 307 : 302, { location: `${other.base}${req.url ?? ''}` }).end()
  })
  const env = await cliEnv(t, base)
  for (const args of [['polling', 'list'], ['polling', 'run', 'a']]) {
    const res = await atTerminal(args, env)
    t.equal(res.code, 1, `${args.join(' ')}: a failure`)
    t.match(res.stderr, /answered 30[27]/)
    t.notMatch(res.stdout + res.stderr, 'reaktor_pat_', 'the token is not printed')
  }
  t.same([seen, other.requests], [[], []], 'nothing reached the redirect target')
})

t.test('the next-page hint, pasted into a shell, gives back the very words: a hostile cursor runs nothing', async (t) => {
  const id = "it's \u202eodd"
  const cursors = ['x; echo INJECTED $(id) `id`', "a'b\u001b[2J\nc\\d"]
  const { base } = await fakeService(t, (req, reply) => {
    const before = new URL(req.url ?? '/', 'http://x').searchParams.get('before')
    const nextBefore = before === null ? cursors[0] : cursors[1]
    if (req.url?.startsWith('/api/v1/polling/') === true) return json(reply, 200, { runs: [], nextBefore })
    json(reply, 200, { entries: [], nextBefore })
  })
  const env = await cliEnv(t, base)
  const cases: Array<[string[], string, string[]]> = [
    [['polling', 'runs', id], 'more: reaktor ', ['polling', 'runs', id, '--before', cursors[0]]],
    [['polling', 'runs', id, '--before', 'y'], 'more: reaktor ', ['polling', 'runs', id, '--before', cursors[1]]],
    [['audit', '--actor', "o'brien"], 'older entries: reaktor ', ['audit', '--actor', "o'brien", '--before', cursors[0]]],
    [['audit', '--before', 'y'], 'older entries: reaktor ', ['audit', '--before', cursors[1]]]
  ]
  for (const [args, prefix, words] of cases) {
    const what = JSON.stringify(args)
    const res = await atTerminal(args, env)
    t.equal(res.code, 0, res.stderr)
    t.notMatch(res.stderr, CONTROL, `${what}: nothing raw on the terminal`)
    const hint = res.stderr.split('\n').find((line) => line.startsWith(prefix))
    t.ok(hint, `${what}: the hint is printed`)
    // The hint's arguments as a shell parses them: one per line, NUL-free.
    const { stdout } = await promisify(execFile)('bash', ['-c', `printf '%s\\0' ${hint?.slice(prefix.length) ?? ''}`], { env: { LANG: 'C.UTF-8' } })
    t.same(stdout.split('\0').slice(0, -1), words, `${what}: the pasted hint names the same id and cursor`)
  }
})

t.test('a token with a line break or a control character inside is not sent, and not printed', async (t) => {
  const { base, requests } = await fakeService(t, (_req, reply) => json(reply, 200, {}))
  for (const token of ['reaktor_pat_secret\rpart2', 'reaktor_pat_secret\npart2', 'reaktor_pat_secret\u0000part2', 'reaktor_pat_secret part2']) {
    const res = await atTerminal(['whoami'], { XDG_CONFIG_HOME: await cliHome(t), REAKTOR_URL: base, REAKTOR_TOKEN: token })
    t.equal(res.code, 4, JSON.stringify(token))
    t.match(res.stderr, 'holds a space, a line break or a character no token has')
    t.notMatch(res.stdout + res.stderr, 'secret', 'no part of the token printed')
  }
  t.same(requests, [], 'nothing sent')
})

t.test('a config folder of another user: not trusted as the stored login, no obstacle when the URL and the token are given', async (t) => {
  const { base } = await fakeService(t, (_req, reply) => json(reply, 200, { username: 'alice', role: 'admin', kind: 'token', tokenId: 'id', expiresAt: null }))
  const home = await cliHome(t)
  const folder = path.join(home, 'reaktor')
  await fs.mkdir(folder)
  await fs.chown(folder, 65534, 65534)
  let res = await atTerminal(['whoami'], { XDG_CONFIG_HOME: home, REAKTOR_URL: base, REAKTOR_TOKEN: FAKE_TOKEN })
  t.equal(res.code, 0, res.stderr)
  t.match(res.stdout, 'alice')
  res = await atTerminal(['whoami'], { XDG_CONFIG_HOME: home, REAKTOR_URL: base })
  t.equal(res.code, 4, 'the stored login is needed: not trusted, so not logged in')
  t.match(res.stderr, 'belongs to another user')
})

t.test('a 200 that is not a JSON object (a web page, a bare value): a clear failure, not a crash reading its fields', async (t) => {
  const bodies = ['<html><body>Welcome to nginx</body></html>', '42', 'null', '[]']
  let next = 0
  const { base } = await fakeService(t, (_req, reply) => {
    reply.writeHead(200, { 'content-type': 'text/html' }).end(bodies[next++ % bodies.length])
  })
  const env = await cliEnv(t, base)
  for (const body of bodies) {
    const res = await atTerminal(['polling', 'list'], env)
    t.equal(res.code, 1, body)
    t.equal(res.stderr, `reaktor: GET /api/v1/polling answered 200 with no JSON object: is ${base} a reaktor service?\n`, body)
  }
})
