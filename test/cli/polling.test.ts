/**
 * `reaktor polling …` against a listening service with a few polling reaktors, a few commands of
 * each test as a subprocess (as `npx reaktor` runs it), the others as `main` in this process:
 * tables and `--json` of list, status and runs, the filters of list, single and bulk start/stop,
 * run now, the next-page hint, and the exit codes (1, 2, 3, 4).
 */
import { spawn } from 'node:child_process'
import path from 'node:path'
import t from 'tap'
import { ADMIN_ENV, apiAs, createApiToken, loginToken } from '../helpers/auth.js'
import { listeningApp } from '../helpers/browser.js'
import { cliHome, runCli, runCliInProcess, type CliResult } from '../helpers/cli.js'
import { waitFor } from '../helpers/timing.js'
import { ROOT } from '../helpers/paths.js'
import { FAST_SCHEDULER, probe } from '../helpers/scheduler.js'

/** Every reaktor runs once at its start, then an hour later: nothing changes while the test reads. */
function reaktor (id: string, behaviour: () => unknown, autoStart: boolean, extra: object = {}): ReturnType<typeof probe>['registration'] {
  return probe(id, behaviour, { interval: '1h', autoStart, ...extra }).registration
}

const { app, base } = await listeningApp(t, {
  env: ADMIN_ENV,
  scheduler: FAST_SCHEDULER,
  apps: [
    { name: 'cli-app', version: '1.0.0', pollingReaktors: [reaktor('alpha', () => false, true, { description: 'Moves quartz' }), reaktor('beta', () => false, false), reaktor('gamma', () => { throw new Error('boom') }, true)] },
    { name: 'other-app', version: '1.0.0', pollingReaktors: [reaktor('delta', () => false, false, { label: 'Delta reaktor' })] }
  ]
})
const session = await loginToken(app)
const call = apiAs(app, session)
const { token } = await createApiToken(app, session, { name: 'cli test' })
const home = await cliHome(t)
const env = { XDG_CONFIG_HOME: home, REAKTOR_URL: base, REAKTOR_TOKEN: token }
const cli = async (...args: string[]): Promise<CliResult> => await runCli(args, { env })
/** The same in this process: most checks here, a few commands of each test as processes. */
const inProcess = async (...args: string[]): Promise<CliResult> => await runCliInProcess(args, { env })

await waitFor(async () => {
  const byId = Object.fromEntries((await call('GET', '/api/v1/polling')).body.pollingReaktors.map((s: any) => [s.reaktorDefinitionId, s]))
  return byId.alpha?.lastOutcome === 'no_work' && byId.gamma?.consecutiveFailures === 1
}, { what: 'the first runs of alpha and gamma in their status' })

/** The cells of a table's lines (columns are two or more spaces apart; no cell here has two spaces). */
function cells (table: string): string[][] {
  return table.trimEnd().split('\n').map((line) => line.split(/ {2,}/))
}

function ids (json: string): string[] {
  return JSON.parse(json).pollingReaktors.map((s: any) => s.reaktorDefinitionId)
}

t.test('list and status: tables, --json as the API answers, the filters', async (t) => {
  const listed = (await call('GET', '/api/v1/polling')).body
  const [table, json, running, failing, otherApp, query, none, status, statusJson, described] = await Promise.all([
    cli('polling', 'list'),
    cli('polling', 'list', '--json'),
    inProcess('polling', 'list', '--json', '--state', 'running'),
    inProcess('polling', 'list', '--json', '--failing'),
    inProcess('polling', 'list', '--json', '--app', 'other-app'),
    inProcess('polling', 'list', '--json', '-q', 'DELTA REAK'),
    inProcess('polling', 'list', '--state', 'stopped', '--failing'),
    inProcess('polling', 'status', 'gamma'),
    inProcess('--json', 'polling', 'status', 'alpha'),
    inProcess('polling', 'list', '--json', '--query', 'quartz')
  ])
  for (const res of [table, json, running, failing, otherApp, query, none, status, statusJson, described]) t.equal(res.code, 0, res.stderr)
  const byId = Object.fromEntries(listed.pollingReaktors.map((s: any) => [s.reaktorDefinitionId, s]))
  t.same(cells(table.stdout), [
    ['ID', 'APP', 'STATE', 'INTERVAL', 'LAST RUN', 'OUTCOME', 'NEXT RUN', 'FAILURES', 'OWNER'],
    ['alpha', 'cli-app', 'running', '1h', byId.alpha.lastRun, 'no_work', byId.alpha.nextRun, '0', 'test-node'],
    ['beta', 'cli-app', 'stopped', '1h', '-', '-', '-', '0', '-'],
    ['delta', 'other-app', 'stopped', '1h', '-', '-', '-', '0', '-'],
    ['gamma', 'cli-app', 'running', '1h', byId.gamma.lastRun, 'failed', byId.gamma.nextRun, '1', 'test-node']
  ], 'one row per reaktor, ISO times when not at a terminal')
  t.same(JSON.parse(json.stdout), listed, '--json: the API answer')
  t.same(ids(running.stdout), ['alpha', 'gamma'], '--state running')
  t.same(ids(failing.stdout), ['gamma'], '--failing')
  t.same(ids(otherApp.stdout), ['delta'], '--app')
  t.same(ids(query.stdout), ['delta'], '-q matches the label, in any case')
  t.same(ids(described.stdout), [], '-q does not look in the description, as the API\'s q does not')
  t.same((await call('GET', '/api/v1/polling?q=quartz')).body.total, 0, 'the API\'s q: the same')
  t.equal(none.stdout, '(none)\n', 'no match: an empty table says so')
  t.match(status.stdout, /^id:\s+gamma\n/)
  t.match(status.stdout, /\nstate:\s+running\n/)
  t.match(status.stdout, /\nlast error:\s+Error: boom\n/)
  t.match(status.stdout, /\nfailures:\s+1\n/)
  t.same(JSON.parse(statusJson.stdout), byId.alpha, 'status --json: the API answer')
})

t.test('start, stop, run, runs', async (t) => {
  const state = async (id: string): Promise<string> => (await call('GET', `/api/v1/polling/${id}/status`)).body.state

  let res = await cli('polling', 'start', 'beta')
  t.same([res.code, res.stdout], [0, 'Polling reaktor "beta" started successfully\n'], 'one id: the single route')
  t.equal(await state('beta'), 'running')

  res = await cli('polling', 'stop', '--app', 'cli-app')
  t.equal(res.code, 0, res.stderr)
  t.same(cells(res.stdout), [['ID', 'RESULT'], ['alpha', 'stopped'], ['beta', 'stopped'], ['gamma', 'stopped'], ['3 changed, 0 unchanged, 0 not found']])
  t.same(await Promise.all(['alpha', 'beta', 'gamma', 'delta'].map(state)), ['stopped', 'stopped', 'stopped', 'stopped'])

  const [bulk, run, unknownRun] = await Promise.all([
    cli('--json', 'polling', 'start', 'delta', 'nope', 'beta', 'delta', 'nope'),
    inProcess('polling', 'run', 'alpha'),
    inProcess('polling', 'run', 'nope')
  ])
  t.equal(bulk.code, 3, 'an unknown id among several: exit 3, the others still applied')
  t.same(JSON.parse(bulk.stdout), {
    action: 'start',
    results: [{ reaktorDefinitionId: 'delta', result: 'started' }, { reaktorDefinitionId: 'nope', result: 'not_found' }, { reaktorDefinitionId: 'beta', result: 'started' }],
    changed: 2,
    unchanged: 0,
    notFound: ['nope']
  }, '--json: the bulk answer')
  t.match(bulk.stderr, 'not registered: nope')
  t.same(await Promise.all(['beta', 'delta'].map(state)), ['running', 'running'], 'an id named twice: once, in the order first named')
  res = await cli('polling', 'stop', 'beta', 'beta')
  t.same([res.code, res.stdout], [0, 'Polling reaktor "beta" stopped successfully\n'], 'one id named twice: the single route')
  res = await cli('polling', 'start', 'beta')
  t.equal(res.code, 0, res.stderr)
  t.equal(run.code, 1, 'run on a stopped reaktor')
  t.match(run.stderr, 'Polling reaktor "alpha" is stopped: start it first')
  t.equal(unknownRun.code, 3, 'run on an unknown id')
  t.match(unknownRun.stderr, 'Polling reaktor "nope" is not registered')

  res = await inProcess('polling', 'start', 'alpha', '--json')
  t.same([res.code, JSON.parse(res.stdout)], [0, { message: 'Polling reaktor "alpha" started successfully' }], 'one id, --json: the API answer')
  // The start's own first run, before run now: a run requested while that run is still due would be that run.
  await waitFor(async () => (await call('GET', '/api/v1/polling/alpha/runs')).body.runs.length >= 2, { what: 'the run of alpha after its start' })
  const [run2, runJson] = await Promise.all([inProcess('polling', 'run', 'alpha'), inProcess('polling', 'run', 'alpha', '--json')])
  t.same([run2.code, run2.stdout], [0, 'Polling reaktor "alpha": run requested\n'])
  t.same([runJson.code, JSON.parse(runJson.stdout)], [0, { message: 'Polling reaktor "alpha": run requested' }])
  await waitFor(async () => (await call('GET', '/api/v1/polling/alpha/runs')).body.runs.length >= 3, { what: 'the runs of alpha in its history' })
  const history = (await call('GET', '/api/v1/polling/alpha/runs?limit=2')).body

  const [table, json, notFound] = await Promise.all([
    cli('polling', 'runs', 'alpha', '--limit', '2'),
    inProcess('polling', 'runs', 'alpha', '--limit', '2', '--json'),
    inProcess('polling', 'runs', 'nope')
  ])
  t.equal(table.code, 0, table.stderr)
  t.same(cells(table.stdout), [
    ['STARTED', 'OUTCOME', 'DURATION', 'NODE', 'ERROR'],
    ...history.runs.map((r: any) => [r.startedAt, r.outcome, `${r.durationMs as number}ms`, 'test-node', '-'])
  ])
  t.equal(table.stderr, `more: reaktor polling runs alpha --limit 2 --before ${history.nextBefore as string}\n`, 'the next page, on stderr')
  t.same(JSON.parse(json.stdout), history, '--json: the API answer with its cursor')
  t.equal(notFound.code, 3)

  res = await inProcess('polling', 'runs', 'alpha', '--limit', '2', '--before', history.nextBefore)
  t.equal(res.code, 0, res.stderr)
  const older = (await call('GET', `/api/v1/polling/alpha/runs?limit=2&before=${history.nextBefore as string}`)).body
  t.equal(cells(res.stdout)[1][0], older.runs[0].startedAt, '--before: the older page')
})

t.test('usage errors 2, a refused token 4, unreachable 1, help with an example', async (t) => {
  const results = await Promise.all([
    inProcess('polling', 'status'),
    inProcess('polling', 'list', '--state', 'sleeping'),
    inProcess('polling', 'runs', 'alpha', '--limit', 'ten'),
    inProcess('polling', 'runs', 'alpha', '--limit', '0'),
    inProcess('polling', 'start'),
    inProcess('polling', 'stop', 'alpha', '--app', 'cli-app'),
    cli('polling', 'frobnicate')
  ])
  for (const res of results) {
    t.equal(res.code, 2, res.stderr)
    t.match(res.stderr, /^error: .*\nUsage: reaktor polling/, 'the error, then the usage')
  }
  const [refused, unreachable, help] = await Promise.all([
    runCli(['polling', 'list'], { env: { ...env, REAKTOR_TOKEN: 'reaktor_pat_' + 'x'.repeat(43) } }),
    runCliInProcess(['polling', 'list', '--url', 'http://127.0.0.1:9'], { env }),
    inProcess('polling', 'runs', '--help')
  ])
  t.equal(refused.code, 4, 'a token the service refuses')
  t.match(refused.stderr, 'reaktor login')
  t.equal(unreachable.code, 1, 'unreachable')
  t.match(unreachable.stderr, 'cannot reach http://127.0.0.1:9')
  t.equal(help.code, 0)
  t.match(help.stdout, /Usage: reaktor polling runs \[options\] <id>[\s\S]*Example:\n {2}\$ reaktor polling runs/)
})

t.test('a reader that closes the pipe early (| head): a quiet end, no stack trace', async (t) => {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'reaktor.js'), 'polling', 'list'], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  // Closed long before the command has loaded, let alone asked the service: its one write meets a closed pipe.
  child.stdout.destroy()
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (s: string) => { stderr += s })
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  t.equal(stderr, '', 'nothing on stderr')
  t.equal(code, 0)
})
