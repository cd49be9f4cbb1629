/**
 * `npm run bench [-- --quick] [-- --only=1,2,4] [-- --profile] [-- --history=N] [-- --no-context]`
 *
 * Every scenario, measured side by side in one run against one embedded PostgreSQL.
 * Each process under test runs in its own child process, and so does the load generator. Prints
 * one table per scenario and writes everything to bench/results/latest.json; a full run of a clean
 * checkout also to bench/results/<date>-<commit>-full.json, the file kept in git for the README's figures.
 *
 * --profile: the service's HTTP server and the scheduler nodes run with --cpu-prof (profiles in
 * bench/results/profiles; `node --import tsx bench/profile.ts FILE` prints the hottest functions).
 *
 * --history=N: RUN_HISTORY_PER_REAKTOR of scenario 4's node (default 100, the service's; 0: off).
 * With history on, every reaktor starts with N history rows, so the pruning runs as it does in a
 * steady state, not only after N runs of each.
 */
import { spawn, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { Kysely, PostgresDialect, sql } from 'kysely'
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/db/embedded.js'
import { migrateToLatest } from '../src/db/migrate.js'
import { databaseUrlFor } from '../test/helpers/database.js'
import { ADMIN, BENCH_APP, ECHO_BODY, JS_BYTES, reaktorId, writeBenchApp } from './fixture.js'
import { load, removeScripts, wrkCommand, type LoadOptions, type LoadResult } from './load.js'
import { startNginx, type Nginx } from './nginx.js'
import type { Captured } from './servers.js'
import type { NodeOptions } from './node.js'
import { describeGraphile, describePgBoss, GRAPHILE, installedVersion, PGBOSS, type GraphileSettings, type PgBossSettings } from './peers.js'
import { BENCH_DIR, delay, forkChild, formatTable, mean, median, sum, percentile, ROOT, round, wallNow, type ChildHandle, type Message, type Row } from './lib.js'

const args = process.argv.slice(2)
const quick = args.includes('--quick')
const profile = args.includes('--profile')
/** --no-context: the HTTP scenarios without their context peers (@fastify/static, nginx). */
const withContext = !args.includes('--no-context')
const only = args.find((a) => a.startsWith('--only='))?.slice('--only='.length).split(',').map(Number)
const runs = (n: number): boolean => only === undefined || only.includes(n)
/** Scenario 11 subsets: --cases=0,2 (of SCALE_CASES) and --kills=N. */
const cases = args.find((a) => a.startsWith('--cases='))?.slice('--cases='.length).split(',').map(Number)
const kills = args.find((a) => a.startsWith('--kills='))?.slice('--kills='.length)
const historyPerReaktor = Number(args.find((a) => a.startsWith('--history='))?.slice('--history='.length) ?? 100)

/** Every duration and count of the run; quick mode keeps the whole run under 2 minutes. */
const P = quick
  ? { httpSeconds: 2, warmupSeconds: 1, rounds: 3, connections: 50, s4Reaktors: 10_000, s4WindowMs: 6000, s4SettleMs: 3000, s5WindowMs: 2000, s6Samples: 5, s7Kills: 2, s9Fresh: 1, s9Warm: 1, catchUpMs: 10_000, s11WindowMs: 6000, s11Cases: [0], s11Kills: 1 }
  : { httpSeconds: 10, warmupSeconds: 2, rounds: 3, connections: 50, s4Reaktors: 10_000, s4WindowMs: 30_000, s4SettleMs: 6000, s5WindowMs: 10_000, s6Samples: 20, s7Kills: 10, s9Fresh: 2, s9Warm: 3, catchUpMs: 60_000, s11WindowMs: 30_000, s11Cases: [0, 1, 2], s11Kills: 3 }
if (cases !== undefined) P.s11Cases = cases
if (kills !== undefined) P.s11Kills = Number(kills)
const INTERVAL_MS = 3000
const RESULTS_DIR = path.join(BENCH_DIR, 'results')

const results: Record<string, unknown> = {}
const output: string[] = []
const cleanups: Array<() => Promise<unknown>> = []

function print (title: string, rows: Row[]): void {
  const text = formatTable(title, rows)
  output.push(text)
  process.stdout.write(`\n${text}`)
}

function note (text: string): void {
  process.stderr.write(`  … ${text}\n`)
}

function pass (ok: boolean): string {
  return ok ? 'yes' : 'NO'
}

// ------------------------------------------------------------------ database

let embedded: EmbeddedPostgres
let adminUrl: string

async function createDatabase (name: string): Promise<string> {
  const client = new pg.Client({ connectionString: adminUrl })
  await client.connect()
  try {
    await client.query(`drop database if exists ${name} with (force)`)
    await client.query(`create database ${name}`)
  } finally {
    await client.end()
  }
  return databaseUrlFor(adminUrl, name)
}

// ------------------------------------------------------------------ HTTP scenarios

/** One server answering one scenario's request. */
interface HttpPeer { label: string, options: Omit<LoadOptions, 'connections' | 'duration'>, does: string }

interface Scenario {
  n: number
  scenario: string
  /** ours / reference, mean req/s of the rounds. */
  target?: number
  ours: HttpPeer
  /** The Node ceiling: a bare Fastify route giving the same answer. */
  reference: HttpPeer
  /** Printed for context only. */
  context: HttpPeer[]
}

async function measure (peer: Pick<HttpPeer, 'options'>, seconds: number): Promise<LoadResult> {
  return await load({ ...peer.options, connections: P.connections, duration: seconds })
}

/** A warm-up of each peer, then `rounds` rounds, the peers in turn within each: the results per peer. */
async function measureRounds (peers: Array<Pick<HttpPeer, 'options'>>): Promise<LoadResult[][]> {
  for (const peer of peers) await measure(peer, P.warmupSeconds)
  const rounds = peers.map((): LoadResult[] => [])
  for (let r = 0; r < P.rounds; r++) {
    for (const [i, peer] of peers.entries()) rounds[i].push(await measure(peer, P.httpSeconds))
  }
  return rounds
}

const rps = (list: LoadResult[]): number[] => list.map((l) => l.requestsPerSecond)
const spread = (values: number[], digits = 0): string => `${round(Math.min(...values), digits)}–${round(Math.max(...values), digits)}`
const failedIn = (list: LoadResult[]): number => sum(list, (l) => l.non2xx + l.errors + l.timeouts)

/**
 * Every peer of a scenario in turn, `rounds` times (ours, reference, context…, then again), after
 * a warm-up of each. A row per peer: mean req/s with its spread over the rounds; ours also gets
 * the ratio of the means and the spread of the per-round ratios.
 */
async function compare (s: Scenario): Promise<Row[]> {
  const peers = [s.ours, s.reference, ...(withContext ? s.context : [])]
  const rounds = await measureRounds(peers)
  const ratios = rounds[0].map((l, r) => l.requestsPerSecond / rounds[1][r].requestsPerSecond)
  const ratio = mean(rps(rounds[0])) / mean(rps(rounds[1]))
  return peers.map((peer, i): Row => {
    const list = rounds[i]
    const failed = failedIn(list)
    const isOurs = i === 0
    return {
      scenario: s.scenario,
      server: peer.label,
      'req/s': Math.round(mean(rps(list))),
      'min–max': spread(rps(list)),
      'p50 ms': round(mean(list.map((l) => l.latencyP50)), 2),
      'p99 ms': round(mean(list.map((l) => l.latencyP99)), 2),
      'bytes/answer': Math.round(mean(list.map((l) => l.bytesPerResponse))),
      failed,
      'of ceiling': isOurs ? `${round(ratio, 2)}x (${spread(ratios, 2)})` : i === 1 ? '1x' : `${round(mean(rps(list)) / mean(rps(rounds[1])), 2)}x`,
      target: isOurs && s.target !== undefined ? `≥ ${s.target}x` : '',
      met: isOurs && s.target !== undefined ? pass(ratio >= s.target && failed === 0) : '',
      'per request': peer.does
    }
  })
}

/** An answer of the service, captured to be sent again as it is by the reference routes. */
async function capture (url: string, headers: Record<string, string>): Promise<Captured> {
  // No Accept-Encoding, as wrk sends none: the identity bytes.
  const res = await fetch(url, { headers: { ...headers, 'accept-encoding': 'identity' } })
  const body = Buffer.from(await res.arrayBuffer())
  if (res.status !== 200) throw new Error(`${url}: ${res.status} ${body.toString()}`)
  const kept: Record<string, string> = {}
  res.headers.forEach((value, name) => {
    if (!['date', 'connection', 'keep-alive', 'transfer-encoding'].includes(name)) kept[name] = value
  })
  if ('set-cookie' in kept) throw new Error(`${url} sets a cookie: the reference could not answer the same`)
  return { headers: kept, body: body.toString('base64') }
}

/** wrk against nginx's 2-byte answer and its static 27 KB: how fast the generator itself can go. */
async function generatorCeiling (nginx: Nginx): Promise<void> {
  const peers = [
    { label: `nginx ${nginx.version}, 1 worker: 2-byte answer`, options: { url: `${nginx.url}/tiny` } },
    { label: `nginx ${nginx.version}, 1 worker: app.js (27 KB)`, options: { url: `${nginx.url}/static/app.js` } }
  ]
  const rounds = await measureRounds(peers)
  const rows = peers.map((peer, i): Row => ({
    target: peer.label,
    'req/s': Math.round(mean(rps(rounds[i]))),
    'min–max': spread(rps(rounds[i])),
    'MB/s': round(mean(rounds[i].map((l) => l.throughputMBps)), 0),
    failed: failedIn(rounds[i])
  }))
  print(`Generator ceiling: ${wrkVersion()}, 1 thread, ${P.connections} connections, ${P.httpSeconds} s × ${P.rounds} rounds, against nginx (a server in C, 1 worker). The scenarios below stay well under these figures, so the generator is not what limits them`, rows)
  results.generatorCeiling = rows
}

let wrkName: string | undefined
/** `wrk` and its version, as wrk -v prints it (asked once). */
function wrkVersion (): string {
  if (wrkName !== undefined) return wrkName
  const out = spawnSync(wrkCommand(), ['-v'], { encoding: 'utf8' })
  wrkName = (`${out.stdout}${out.stderr}`.match(/wrk (\S+)/)?.[0]) ?? 'wrk'
  return wrkName
}

async function httpScenarios (tmp: string): Promise<void> {
  const publicDir = await writeBenchApp(path.join(tmp, 'bench-app'))
  const databaseUrl = await createDatabase('bench_http')
  const dataDir = path.join(tmp, 'http-data')
  const execArgv = profile ? ['--cpu-prof', `--cpu-prof-dir=${path.join(RESULTS_DIR, 'profiles')}`] : []
  const service = forkChild('service', 'servers.ts', ['service', JSON.stringify({ publicDir, databaseUrl, dataDir })], { execArgv })
  cleanups.push(async () => await service.shutdown())
  const ours = String((await service.ready).url)

  const login = await fetch(`${ours}/api/v1/auth/login`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN)
  })
  if (login.status !== 200) throw new Error(`bench login failed: ${login.status} ${await login.text()}`)
  const { token } = await login.json() as { token: string }
  const cookie = { cookie: `reaktor_session=${token}` }
  const auth = { 'x-service-token': token }
  const app = `/app-ui/${BENCH_APP.name}@${BENCH_APP.version}/`
  const statusPath = `/api/v1/polling/${reaktorId(7)}/status`

  // The references answer exactly what the service answers: bytes and headers.
  const js = await capture(`${ours}${app}app.js`, cookie)
  const html = await capture(`${ours}${app}`, cookie)
  const jsBytes = Buffer.from(js.body, 'base64')
  const htmlBytes = Buffer.from(html.body, 'base64')
  if (jsBytes.length !== JS_BYTES) throw new Error('app.js is not the size meant')
  if (!htmlBytes.toString().includes('getServiceAuthToken')) throw new Error('the HTML page has no token helper')
  const status = await (await fetch(`${ours}${statusPath}`, { headers: auth })).json()
  const list = await (await fetch(`${ours}/api/v1/polling`, { headers: auth })).json() as { pollingReaktors: unknown[] }
  if (list.pollingReaktors.length !== 50) throw new Error(`expected 50 reaktors, got ${list.pollingReaktors.length}`)
  // The same bytes as files, for @fastify/static and nginx.
  const sameDir = path.join(tmp, 'same-bytes')
  await fs.mkdir(sameDir, { recursive: true, mode: 0o755 })
  await fs.writeFile(path.join(sameDir, 'app.js'), jsBytes)
  await fs.writeFile(path.join(sameDir, 'index.html'), htmlBytes)

  const bare = forkChild('bare', 'servers.ts', ['bare', JSON.stringify({ publicDir: sameDir })], { execArgv })
  cleanups.push(async () => await bare.shutdown())
  const base = String((await bare.ready).url)
  await bare.request({ type: 'setJson', status, list, same: { js, html } })
  const { 'content-type': _t, 'content-length': _l, etag: _e, ...sameHeaders } = js.headers
  const nginx = await startNginx(path.join(tmp, 'nginx'), sameDir, sameHeaders)
  cleanups.push(nginx.stop)

  if ((runs(1) || runs(2)) && withContext) await generatorCeiling(nginx)

  /**
   * Scenarios 1 and 2: one file of the app UI (asked for as `asked` below the app), against the
   * same bytes from memory (`/same/<same>`) and, for context, from disk (`file`).
   */
  const appUiFile = (n: number, scenario: string, target: number, asked: string, file: string, same: string): Scenario => ({
    n,
    scenario,
    target,
    ours: { label: 'reaktor-service', options: { url: `${ours}${app}${asked}`, headers: cookie }, does: 'session checked, CSP, file from memory' },
    reference: { label: 'bare Fastify route', options: { url: `${base}/same/${same}` }, does: 'same bytes and headers from memory' },
    context: [
      { label: '@fastify/static', options: { url: `${base}/static/${file}` }, does: 'stat, stream from disk' },
      { label: `nginx ${nginx.version}`, options: { url: `${nginx.url}/static/${file}` }, does: 'sendfile' }
    ]
  })
  const scenarios: Scenario[] = [
    appUiFile(1, '1 app-UI JS 27 KB', 0.7, 'app.js', 'app.js', 'js'),
    appUiFile(2, '2 app-UI HTML + helper', 0.6, '', 'index.html', 'html'),
    {
      n: 3,
      scenario: '3 GET status',
      target: 0.5,
      ours: { label: 'reaktor-service', options: { url: `${ours}${statusPath}`, headers: auth }, does: 'token checked, JSON from the status cache' },
      reference: { label: 'bare Fastify route', options: { url: `${base}/status` }, does: 'serialized by the same schema' },
      context: []
    },
    {
      n: 3,
      scenario: '3 GET list (50)',
      ours: { label: 'reaktor-service', options: { url: `${ours}/api/v1/polling`, headers: auth }, does: 'token checked, JSON from the status cache' },
      reference: { label: 'bare Fastify route', options: { url: `${base}/list` }, does: 'serialized by the same schema' },
      context: []
    },
    {
      n: 8,
      scenario: '8 POST aktor echo',
      ours: { label: 'reaktor-service', options: { url: `${ours}/api/v1/aktor/echo`, method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: ECHO_BODY }, does: 'token checked, body parsed, aktor called, answer serialized' },
      reference: { label: 'bare Fastify route', options: { url: `${base}/echo`, method: 'POST', headers: { 'content-type': 'application/json' }, body: ECHO_BODY }, does: 'body parsed and sent back' },
      context: []
    }
  ]
  const rows: Row[] = []
  for (const s of scenarios.filter((x) => runs(x.n))) {
    note(`HTTP ${s.scenario}`)
    rows.push(...await compare(s))
  }
  print(`Scenarios 1, 2, 3, 8: HTTP through ${wrkVersion()} (1 thread, ${P.connections} connections), ${P.httpSeconds} s × ${P.rounds} alternating rounds per server after a ${P.warmupSeconds} s warm-up; req/s: mean of the rounds (min–max); "of ceiling": ours / the bare Fastify route, ratio of the means (per-round min–max). None of them writes to the database`, rows)
  results.http = rows
  await Promise.all([service.shutdown(), bare.shutdown(), nginx.stop()])
}

// ------------------------------------------------------------------ scheduler scenarios

function nodeOptions (databaseUrl: string, tmp: string, over: Partial<NodeOptions>): NodeOptions {
  return {
    databaseUrl,
    dataDir: path.join(tmp, `node-data-${randomBytes(3).toString('hex')}`),
    nodeId: 'bench-node',
    reaktors: 1,
    interval: '3s',
    intervalMs: INTERVAL_MS,
    behaviour: 'interval',
    autoStart: true,
    compete: true,
    listen: false,
    ...over
  }
}

function startNode (name: string, opts: NodeOptions, extraArgv: string[] = []): ChildHandle {
  const execArgv = [...extraArgv, ...(profile ? ['--cpu-prof', `--cpu-prof-dir=${path.join(RESULTS_DIR, 'profiles')}`] : [])]
  const child = forkChild(name, 'node.ts', [JSON.stringify(opts)], { execArgv })
  cleanups.push(async () => await child.shutdown())
  return child
}

/** Polls `check` until it is true (bounded). */
async function until (what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await delay(100)
  }
}

/** What the database did in a window: transactions and rows written in it, per second and in all, and its WAL. */
interface DatabaseLoad { transactions: number, rows: number, transactionsPerSecond: number, rowsPerSecond: number, walBytes: number }

/**
 * A measured window. `flushes`/`flushedRows`: the service's batched writes of run results in the
 * window (statements, rows), absent for the peers, which have none.
 */
interface Throughput { runs: number, cycles: number, allRanOnce: boolean, windowMs: number, gapCount: number, gapP50: number, gapP99: number, gapMax: number, rss: number, startMs: number, cpuMs: number, load?: DatabaseLoad, flushes?: number, flushedRows?: number }

/** A small per-run figure to 3 significant digits (the tables' own format keeps 2 decimals). */
function sig (value: number): string {
  return value.toLocaleString('en-US', { maximumSignificantDigits: 3 })
}

/** What one run cost the database on average in the window (undefined without counters or runs). */
function perRun (r: Throughput): { transactions: number, rows: number, walBytes: number } | undefined {
  if (r.load === undefined || r.runs === 0) return undefined
  return { transactions: r.load.transactions / r.runs, rows: r.load.rows / r.runs, walBytes: r.load.walBytes / r.runs }
}

/** The database's counters: transactions (one per statement outside a transaction), rows written, WAL position. */
async function databaseCounters (url: string): Promise<{ at: number, xacts: number, rows: number, lsn: string }> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    // Statistics reach the views up to a second late: a forced flush of this session is not enough,
    // so the window is long enough for that to be noise.
    const { rows: [r] } = await client.query<{ xacts: string, rows: string, lsn: string }>(`
      select (select xact_commit + xact_rollback from pg_stat_database where datname = current_database()) as xacts,
             (select coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) from pg_stat_user_tables) as rows,
             pg_current_wal_lsn()::text as lsn`)
    return { at: Date.now(), xacts: Number(r.xacts), rows: Number(r.rows), lsn: r.lsn }
  } finally {
    await client.end()
  }
}

async function walBytesBetween (url: string, from: string, to: string): Promise<number> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return Number((await client.query<{ n: string }>('select pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn) as n', [to, from])).rows[0].n)
  } finally {
    await client.end()
  }
}

/** Migrates the database and gives every reaktor `perReaktor` history rows from a day ago (the steady state of the pruning; run ids time-ordered like the service's). */
async function prefillHistory (url: string, reaktors: number, perReaktor: number): Promise<void> {
  const db = new Kysely<any>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 1 }) }) })
  try {
    await migrateToLatest(db)
    const ids = Array.from({ length: reaktors }, (_, i) => reaktorId(i))
    await sql`
      insert into polling_runs (run_id, reaktor_id, node, started_at, duration_ms, outcome)
      select uuidv7(make_interval(secs => k) - interval '1 day'), id, 'prefill', now() - interval '1 day' + make_interval(secs => k), 0, 'no_work'
      from unnest(${ids}::text[]) as id, generate_series(1, ${perReaktor}::int) as k
    `.execute(db)
    await sql`vacuum analyze polling_runs`.execute(db)
  } finally {
    await db.destroy()
  }
}

/**
 * Starts a node (ours, or a peer's of scenario 10), waits for every reaktor's first run (at most
 * `catchUpMs`: one that never catches up is measured as it is) and a steady state, then measures
 * a window; with `databaseUrl`, also what the database did in it (that database's transactions and
 * rows written; WAL of the whole server, on which nothing else runs meanwhile).
 */
async function measureRuns (child: ChildHandle, reaktors: number, windowMs: number, settleMs: number, databaseUrl?: string): Promise<Throughput> {
  const t0 = Date.now()
  await child.ready
  const allRanOnce = await until(`all ${reaktors} reaktors to run once`, P.catchUpMs, async () => Number((await child.request({ type: 'stats' })).everRan) >= reaktors)
    .then(() => true, () => false)
  const startMs = Date.now() - t0
  await delay(settleMs)
  const before = databaseUrl === undefined ? undefined : await databaseCounters(databaseUrl)
  const begin = await child.request({ type: 'begin' })
  await delay(windowMs)
  const report = await child.request({ type: 'report' })
  const after = databaseUrl === undefined ? undefined : await databaseCounters(databaseUrl)
  await child.shutdown()
  const seconds = before === undefined || after === undefined ? 0 : (after.at - before.at) / 1000
  const load = before === undefined || after === undefined || databaseUrl === undefined
    ? undefined
    : {
        transactions: after.xacts - before.xacts,
        rows: after.rows - before.rows,
        transactionsPerSecond: (after.xacts - before.xacts) / seconds,
        rowsPerSecond: (after.rows - before.rows) / seconds,
        walBytes: await walBytesBetween(databaseUrl, before.lsn, after.lsn)
      }
  const flushed = report.flushedInWindow as { flushes: number, rows: number } | undefined
  return {
    load,
    flushes: flushed?.flushes,
    flushedRows: flushed?.rows,
    runs: Number(report.runs),
    cycles: Number(report.cycles),
    allRanOnce,
    windowMs: Number(report.at) - Number(begin.at),
    // Without gaps (no reaktor ran twice in the window) the statistics are NaN, sent as null.
    gapCount: Number(report.gapCount),
    gapP50: report.gapP50 === null ? NaN : Number(report.gapP50),
    gapP99: report.gapP99 === null ? NaN : Number(report.gapP99),
    gapMax: report.gapMax === null ? NaN : Number(report.gapMax),
    rss: Number(report.rss),
    cpuMs: Number(report.cpuMs),
    startMs
  }
}

async function scenario4and5 (tmp: string): Promise<{ s4?: Throughput, s5?: Throughput }> {
  const out: { s4?: Throughput, s5?: Throughput } = {}
  if (runs(4)) {
    note(`scenario 4: ${P.s4Reaktors} reaktors at 3s (window ${P.s4WindowMs / 1000} s)`)
    const url = await createDatabase('bench_s4')
    if (historyPerReaktor > 0) await prefillHistory(url, P.s4Reaktors, historyPerReaktor)
    const node = startNode('s4-node', nodeOptions(url, tmp, { reaktors: P.s4Reaktors, behaviour: 'interval', historyPerReaktor }))
    const r = await measureRuns(node, P.s4Reaktors, P.s4WindowMs, P.s4SettleMs, url)
    out.s4 = r
    const expected = P.s4Reaktors * r.windowMs / INTERVAL_MS
    const share = r.cycles / expected
    print('Scenario 4: 10,000 polling reaktors at 3s, no-op aktor, one node', [{
      reaktors: P.s4Reaktors,
      'window s': round(r.windowMs / 1000, 1),
      'expected runs': Math.round(expected),
      runs: r.runs,
      'runs, phase-corrected': Math.round(r.cycles),
      'share': `${round(share * 100, 1)} %`,
      'gap−interval p50 ms': round(r.gapP50, 1),
      'gap−interval p99 ms': round(r.gapP99, 1),
      'max ms': round(r.gapMax, 1),
      'RSS MB': round(r.rss / 2 ** 20, 0),
      'node CPU µs/run': round(r.cpuMs * 1000 / Math.max(1, r.runs), 1),
      'all ran once after s': round(r.startMs / 1000, 1),
      met: pass(share >= 0.95 && r.gapP99 <= 100)
    }])
    const cost = perRun(r)
    if (r.load !== undefined && cost !== undefined) {
      print(`Scenario 4: database load (RUN_HISTORY_PER_REAKTOR=${historyPerReaktor})`, [{
        'transactions/s': round(r.load.transactionsPerSecond, 1),
        'rows written/s': Math.round(r.load.rowsPerSecond),
        'result statements/s': round((r.flushes ?? 0) / (r.windowMs / 1000), 1),
        'transactions/run': sig(cost.transactions),
        'rows written/run': sig(cost.rows),
        'WAL bytes/run': Math.round(cost.walBytes),
        'WAL MB/s': round(r.load.walBytes / 2 ** 20 / (r.windowMs / 1000), 2)
      }])
    }
    results.s4 = { ...r, expected, share }
  }
  if (runs(5)) {
    note('scenario 5: one reaktor returning true')
    const url = await createDatabase('bench_s5')
    const node = startNode('s5-node', nodeOptions(url, tmp, { reaktors: 1, behaviour: 'drain' }))
    const r = await measureRuns(node, 1, P.s5WindowMs, 1000, url)
    out.s5 = r
    const perSecond = r.runs / (r.windowMs / 1000)
    const cost = perRun(r)
    print('Scenario 5: one reaktor returning true, back to back (no-op aktor)', [{
      'window s': round(r.windowMs / 1000, 1),
      runs: r.runs,
      'runs/s': Math.round(perSecond),
      target: '≥ 5,000',
      'RSS MB': round(r.rss / 2 ** 20, 0),
      'transactions/run': cost === undefined ? '' : sig(cost.transactions),
      'rows written/run': cost === undefined ? '' : sig(cost.rows),
      'WAL bytes/run': cost === undefined ? '' : sig(cost.walBytes),
      met: pass(perSecond >= 5000)
    }])
    results.s5 = { ...r, perSecond }
  }
  return out
}

async function apiToken (url: string): Promise<string> {
  const res = await fetch(`${url}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN) })
  if (res.status !== 200) throw new Error(`login failed: ${res.status}`)
  return (await res.json() as { token: string }).token
}

async function post (url: string, token: string): Promise<void> {
  const res = await fetch(url, { method: 'POST', headers: { 'x-service-token': token } })
  if (res.status !== 200) throw new Error(`${url}: ${res.status} ${await res.text()}`)
  await res.arrayBuffer()
}

/** Resolves with the next `run` event of `reaktor` from any of `nodes`, or rejects after `timeoutMs`. */
function nextRun (nodes: ChildHandle[], reaktor: string, timeoutMs: number, exclude?: ChildHandle): Promise<Message & { at: number, handle: ChildHandle }> {
  return new Promise((resolve, reject) => {
    let done = false
    const timer = setTimeout(() => { done = true; reject(new Error(`no run of ${reaktor} within ${timeoutMs} ms`)) }, timeoutMs)
    for (const node of nodes) {
      if (node === exclude) continue
      node.onEvent((msg) => {
        if (done || msg.type !== 'run' || msg.reaktorId !== reaktor) return
        done = true
        clearTimeout(timer)
        resolve({ ...msg, at: Number(msg.at), handle: node })
      })
    }
  })
}

async function scenario6 (tmp: string): Promise<void> {
  note('scenario 6: start → first run')
  const url = await createDatabase('bench_s6')
  const k = P.s6Samples
  const common = { reaktors: 2 * k, behaviour: 'probe' as const, autoStart: false, interval: '1h', intervalMs: 3_600_000, listen: true }
  const a = startNode('s6-a', nodeOptions(url, tmp, { ...common, nodeId: 'bench-a' }))
  const b = startNode('s6-b', nodeOptions(url, tmp, { ...common, nodeId: 'bench-b', compete: false }))
  const [ra, rb] = await Promise.all([a.ready, b.ready])
  const token = await apiToken(String(ra.url))
  const measure = async (via: string, i: number): Promise<number> => {
    const id = reaktorId(i)
    const run = nextRun([a, b], id, 10_000)
    const t0 = wallNow()
    await post(`${via}/api/v1/polling/${id}/start`, token)
    const msg = await run
    if (msg.handle !== a) throw new Error('the run happened on the node that does not compete')
    await post(`${via}/api/v1/polling/${id}/stop`, token)
    return msg.at - t0
  }
  const same: number[] = []
  const cross: number[] = []
  for (let i = 0; i < k; i++) {
    same.push(await measure(String(ra.url), i))
    cross.push(await measure(String(rb.url), k + i))
  }
  await Promise.all([a.shutdown(), b.shutdown()])
  const rows: Row[] = [
    { path: 'same node (start sent to the owner)', samples: k, 'p50 ms': round(median(same), 1), 'p90 ms': round(percentile(same, 90), 1), 'max ms': round(Math.max(...same), 1), target: '≤ 10 ms', met: pass(median(same) <= 10) },
    { path: 'cross node (start sent to another node)', samples: k, 'p50 ms': round(median(cross), 1), 'p90 ms': round(percentile(cross, 90), 1), 'max ms': round(Math.max(...cross), 1), target: '≤ 100 ms', met: pass(median(cross) <= 100) }
  ]
  print('Scenario 6: start → first run (HTTP start request sent → aktor called), 2 nodes, one database', rows)
  results.s6 = { same, cross }
}

async function scenario7 (tmp: string): Promise<void> {
  note(`scenario 7: failover, ${P.s7Kills} kills`)
  const url = await createDatabase('bench_s7')
  const opts = (i: number): NodeOptions => nodeOptions(url, tmp, { nodeId: `bench-f${i}`, reaktors: 1, behaviour: 'failover', autoStart: true })
  let spawned = 0
  const nodes: ChildHandle[] = []
  const add = (): ChildHandle => {
    const node = startNode(`s7-node-${spawned}`, opts(spawned++))
    nodes.push(node)
    return node
  }
  const id = reaktorId(0)
  const firstRun = nextRun([add()], id, 60_000)
  await nodes[0].ready
  let owner = (await firstRun).handle
  // The other two join a live cluster.
  await Promise.all([add().ready, add().ready])
  const failovers: number[] = []
  for (let kill = 0; kill < P.s7Kills; kill++) {
    const survivors = nodes.filter((n) => n !== owner)
    const next = nextRun(survivors, id, 30_000)
    const t0 = wallNow()
    owner.proc.kill('SIGKILL')
    const msg = await next
    failovers.push(msg.at - t0)
    await owner.exited
    nodes.splice(nodes.indexOf(owner), 1)
    owner = msg.handle
    // Back to three live nodes before the next kill.
    await add().ready
  }
  await Promise.all(nodes.map(async (n) => await n.shutdown()))
  print('Scenario 7: failover after kill -9 of the owner (kill → first run on another node), 3 nodes', [{
    kills: failovers.length,
    'median ms': Math.round(median(failovers)),
    'min ms': Math.round(Math.min(...failovers)),
    'max ms': Math.round(Math.max(...failovers)),
    target: '≤ 2,000 ms',
    met: pass(median(failovers) <= 2000)
  }])
  results.s7 = { failovers }
}

// ------------------------------------------------------------------ scale (partitioned ownership)

/** Busy core-seconds of the whole machine so far (every process: nodes, PostgreSQL, this one). */
async function busyCoreSeconds (): Promise<number> {
  const [cpu] = (await fs.readFile('/proc/stat', 'utf8')).split('\n')
  const [, user, nice, system, , , irq, softirq, steal] = cpu.trim().split(/\s+/).map(Number)
  return (user + nice + system + irq + softirq + steal) / 100
}

interface ScaleCase { label: string, reaktors: number, nodes: number, interval: string, intervalMs: number, p99Target: number }

const SCALE_CASES: ScaleCase[] = [
  { label: '20,000 at 3s, 1 node', reaktors: 20_000, nodes: 1, interval: '3s', intervalMs: 3000, p99Target: 100 },
  { label: '50,000 at 3s, 3 nodes', reaktors: 50_000, nodes: 3, interval: '3s', intervalMs: 3000, p99Target: 250 },
  { label: '100,000 at 30s, 3 nodes', reaktors: 100_000, nodes: 3, interval: '30s', intervalMs: 30_000, p99Target: 250 }
]

/** Every node owns within 10 % of an even share of `total`. */
function evenlySpread (owned: readonly number[], total: number): boolean {
  const even = total / owned.length
  return owned.every((o) => Math.abs(o - even) <= 0.1 * even)
}

/** Starts the nodes of a case (the first alone: the cold start inserts the rows), waits for an even spread. */
async function startCluster (tmp: string, db: string, c: { reaktors: number, nodes: number, interval: string, intervalMs: number, behaviour: NodeOptions['behaviour'] }, name: string): Promise<ChildHandle[]> {
  const nodes: ChildHandle[] = []
  for (let i = 0; i < c.nodes; i++) {
    nodes.push(startNode(`${name}-${i}`, nodeOptions(db, tmp, { nodeId: `${name}-${i}`, reaktors: c.reaktors, interval: c.interval, intervalMs: c.intervalMs, behaviour: c.behaviour }), ['--expose-gc']))
    await nodes[i].ready
  }
  await until(`an even spread of ${c.reaktors} reaktors over ${c.nodes} nodes`, 120_000, async () => {
    const owned = await Promise.all(nodes.map(async (n) => Number((await n.request({ type: 'stats' })).owned)))
    return sum(owned) === c.reaktors && evenlySpread(owned, c.reaktors)
  })
  return nodes
}

async function scaleCase (tmp: string, c: ScaleCase, index: number): Promise<Row> {
  note(`scenario 11: ${c.label} (window ${P.s11WindowMs / 1000} s)`)
  const db = await createDatabase(`bench_s11_${index}`)
  const t0 = Date.now()
  const nodes = await startCluster(tmp, db, { ...c, behaviour: 'interval' }, `s11-${index}`)
  const spreadMs = Date.now() - t0
  // A full interval after the spread settled: every reaktor has run on its current owner.
  await delay(Math.max(P.s4SettleMs, c.intervalMs + 1000))
  const cpu0 = await busyCoreSeconds()
  const begins = await Promise.all(nodes.map(async (n) => await n.request({ type: 'begin' })))
  await delay(Math.max(P.s11WindowMs, c.intervalMs))
  const reports = await Promise.all(nodes.map(async (n) => await n.request({ type: 'report' })))
  const cpu1 = await busyCoreSeconds()
  await Promise.all(nodes.map(async (n) => await n.shutdown()))
  const windowMs = mean(reports.map((r, i) => Number(r.at) - Number(begins[i].at)))
  const expected = c.reaktors * windowMs / c.intervalMs
  const cycles = sum(reports, (r) => Number(r.cycles))
  const runs = sum(reports, (r) => Number(r.runs))
  const share = cycles / expected
  const p99 = Math.max(...reports.map((r) => Number(r.gapP99)))
  const owned = reports.map((r) => Number(r.owned))
  const evenOk = evenlySpread(owned, c.reaktors)
  const flushed = sum(reports, (r) => (r.flushedInWindow as { rows: number }).rows)
  const statements = sum(reports, (r) => (r.flushedInWindow as { flushes: number }).flushes)
  const refusals = sum(reports, (r) => Number(r.lockRefusals))
  const cpuPerRunUs = (cpu1 - cpu0) * 1e6 / Math.max(1, runs)
  const nodeCpuPerRunUs = sum(reports, (r) => Number(r.cpuMs)) * 1000 / Math.max(1, runs)
  const rss = reports.map((r) => Number(r.rss) / 2 ** 20)
  const row: Row = {
    case: c.label,
    'window s': round(windowMs / 1000, 1),
    'expected runs': Math.round(expected),
    'runs, phase-corrected': Math.round(cycles),
    share: `${round(share * 100, 1)} %`,
    'gap−interval p99 ms (worst node)': round(p99, 1),
    'owned per node': owned.join(' / '),
    'results flushed (statements)': `${flushed} (${statements})`,
    'lock refusals': refusals,
    'CPU µs/run, all processes': Math.round(cpuPerRunUs),
    'CPU µs/run, nodes': Math.round(nodeCpuPerRunUs),
    'RSS MB per node': rss.map((r) => Math.round(r)).join(' / '),
    'spread after s': round(spreadMs / 1000, 1),
    met: pass(share >= 0.95 && p99 <= c.p99Target && (c.nodes === 1 || evenOk) && refusals === 0)
  }
  results[`s11_${index}`] = { ...c, windowMs, expected, cycles, runs, share, p99, owned, flushed, statements, refusals, cpuPerRunUs, nodeCpuPerRunUs, rss, spreadMs, reports }
  return row
}

/** kill -9 of one of 3 nodes holding about 3,000 reaktors each: failover of every orphan, no overlap. */
async function scaleKill (tmp: string, index: number): Promise<Row> {
  const reaktors = 9000
  note(`scenario 11: kill -9 of one of 3 nodes with ${reaktors / 3} reaktors each (${index + 1}/${P.s11Kills})`)
  const db = await createDatabase(`bench_s11_kill_${index}`)
  const nodes = await startCluster(tmp, db, { reaktors, nodes: 3, interval: '3s', intervalMs: 3000, behaviour: 'ledger' }, `s11k-${index}`)
  await delay(4000)
  await Promise.all(nodes.map(async (n) => await n.request({ type: 'watch' })))
  await delay(3500)
  const [victim, ...survivors] = nodes
  const before = await victim.request({ type: 'ledger' })
  const killedAt = wallNow()
  victim.proc.kill('SIGKILL')
  await victim.exited
  await delay(8000)
  const after = await Promise.all(survivors.map(async (n) => await n.request({ type: 'ledger' })))
  await Promise.all(survivors.map(async (n) => await n.shutdown()))
  type Run = [number, number, number]
  // The victim's runs: recorded ones, and those in flight at the kill (they end with the process).
  const victimRuns: Run[] = [...(before.runs as Run[]), ...(before.inFlight as Array<[number, number]>).map(([i, start]): Run => [i, start, killedAt])]
  const orphans = before.owned as number[]
  const byReaktor = new Map<number, Run[]>()
  for (const run of [...victimRuns, ...after.flatMap((a) => a.runs as Run[])]) byReaktor.set(run[0], [...(byReaktor.get(run[0]) ?? []), run])
  let overlaps = 0
  for (const list of byReaktor.values()) {
    list.sort((a, b) => a[1] - b[1])
    for (let i = 1; i < list.length; i++) if (list[i][1] < list[i - 1][2]) overlaps++
  }
  const toFirstRun: number[] = []
  const lateness: number[] = []
  let missing = 0
  for (const i of orphans) {
    const runs = byReaktor.get(i) ?? []
    const first = runs.find((r) => r[1] > killedAt)
    if (first === undefined) { missing++; continue }
    toFirstRun.push(first[1] - killedAt)
    // When it was due: one interval after its last run on the victim ended (or at once).
    const last = runs.filter((r) => r[1] <= killedAt).pop()
    const due = last === undefined ? killedAt : Math.max(killedAt, last[2] + 3000)
    lateness.push(first[1] - due)
  }
  results[`s11_kill_${index}`] = { orphans: orphans.length, missing, overlaps, toFirstRun, lateness, runs: victimRuns.length + sum(after, (x) => (x.runs as Run[]).length) }
  return {
    kill: index + 1,
    orphans: orphans.length,
    'ran again': orphans.length - missing,
    'to first run p50 ms': Math.round(median(toFirstRun)),
    'to first run max ms': Math.round(Math.max(...toFirstRun)),
    'after due p50 ms': Math.round(median(lateness)),
    'after due max ms': Math.round(Math.max(...lateness)),
    'caught up early': lateness.filter((l) => l < -50).length,
    'ledger runs': Number((results[`s11_kill_${index}`] as { runs: number }).runs),
    overlaps,
    met: pass(missing === 0 && overlaps === 0 && Math.max(...toFirstRun) <= 3000)
  }
}

async function scenario11 (tmp: string): Promise<void> {
  const rows: Row[] = []
  for (const i of P.s11Cases) rows.push(await scaleCase(tmp, SCALE_CASES[i], i))
  print('Scenario 11: ownership at scale (partitions), no-op aktor, every run result persisted in batches, targets: ≥ 95 % of expected runs, p99 gap excess ≤ 100 ms (1 node) / 250 ms (3 nodes), nodes within 10 % of an even share, no lock error', rows)
  const r0 = results.s11_0 as { rss: number[], reaktors: number, reports: Message[] } | undefined
  if (r0 !== undefined) {
    // The same node process without reaktors: what the service itself takes.
    note('scenario 11: memory of a node without reaktors')
    const idle = startNode('s11-idle', nodeOptions(await createDatabase('bench_s11_idle'), tmp, { nodeId: 's11-idle', reaktors: 0 }), ['--expose-gc'])
    await idle.ready
    await delay(5000)
    const base = await idle.request({ type: 'report' })
    await idle.shutdown()
    const mb = (v: unknown): number => Number(v) / 2 ** 20
    const per = r0.reaktors / 10_000
    const rssPer = r0.rss[0] / per
    const marginal = (r0.rss[0] - mb(base.rss)) / per
    const heapPer = (mb(r0.reports[0].liveHeap) - mb(base.liveHeap)) / per
    print('Scenario 11: memory of one node with 20,000 reaktors at 3s (RSS at the end of the window; live heap after a forced full GC)', [
      { node: '20,000 reaktors', 'RSS MB': round(r0.rss[0], 0), 'live heap MB': round(mb(r0.reports[0].liveHeap), 0) },
      { node: 'no reaktors (same process, same service)', 'RSS MB': round(mb(base.rss), 0), 'live heap MB': round(mb(base.liveHeap), 0) },
      { node: 'per 10,000 reaktors: RSS / 2', 'RSS MB': round(rssPer, 0), 'live heap MB': '', target: '< 200', met: pass(rssPer < 200) },
      { node: 'per 10,000 reaktors: above the idle node', 'RSS MB': round(marginal, 0), 'live heap MB': round(heapPer, 1), target: '', met: '' }
    ])
    results.s11_memory = { base, rssPer, marginal, heapPer }
  }
  const kills: Row[] = []
  for (let k = 0; k < P.s11Kills; k++) kills.push(await scaleKill(tmp, k))
  print('Scenario 11: kill -9 of one of 3 nodes, 9,000 reaktors at 3s with 20 ms runs; "after due": first run on a survivor minus max(kill, when it was due; negative: a catch-up run, the victim\'s last results were not flushed yet); target: every orphan runs again, no overlap, to first run ≤ 3,000 ms', kills)
}

// ------------------------------------------------------------------ start-up

/** Starts `node src/server.ts` on DATA_DIR and resolves with the times of its log milestones. */
async function serverStart (dataDir: string): Promise<{ pgMs: number, listeningMs: number }> {
  const t0 = Date.now()
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: '', DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', NODE_ID: 'bench-startup' },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let out = ''
  let pgMs = NaN
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  const listening = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not listen within 120 s: ${out}`)), 120_000)
    const onData = (d: Buffer): void => {
      out += d.toString()
      if (Number.isNaN(pgMs) && out.includes('embedded PostgreSQL started')) pgMs = Date.now() - t0
      if (/Server listening at/.test(out)) { clearTimeout(timer); resolve(Date.now() - t0) }
    }
    child.stdout.on('data', onData)
    child.stderr.on('data', onData)
    void exited.then((code) => { clearTimeout(timer); reject(new Error(`server exited (${code}) before listening: ${out}`)) })
  })
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
  await exited
  clearTimeout(timer)
  return { pgMs, listeningMs: listening }
}

async function scenario9 (tmp: string): Promise<void> {
  note('scenario 9: start-up time')
  const fresh: Array<{ pgMs: number, listeningMs: number }> = []
  const warm: Array<{ pgMs: number, listeningMs: number }> = []
  let dir = ''
  for (let i = 0; i < P.s9Fresh; i++) {
    dir = path.join(tmp, `startup-${i}`)
    await fs.mkdir(dir, { recursive: true, mode: 0o755 })
    await fs.chmod(dir, 0o755)
    fresh.push(await serverStart(dir))
  }
  for (let i = 0; i < P.s9Warm; i++) warm.push(await serverStart(dir))
  const row = (label: string, list: typeof fresh): Row => ({
    start: label,
    samples: list.length,
    'embedded PostgreSQL ready ms (median)': Math.round(median(list.map((l) => l.pgMs))),
    'listening ms (median)': Math.round(median(list.map((l) => l.listeningMs))),
    'listening ms (max)': Math.round(Math.max(...list.map((l) => l.listeningMs)))
  })
  print('Scenario 9: start-up of `node --import tsx src/server.ts` (process spawn → "Server listening"), embedded PostgreSQL, shipped example apps', [row('first run (fresh DATA_DIR: initdb, admin password)', fresh), row('warm (same DATA_DIR again)', warm)])
  results.s9 = { fresh, warm }
}

// ------------------------------------------------------------------ job queues (scenario 10)

interface Peer {
  name: string
  version: string
  script: string
  settings: GraphileSettings | PgBossSettings
  /** What one run writes, in words (the figures are measured). */
  writes: string
}

const PEERS: Peer[] = [
  {
    name: 'graphile-worker',
    version: installedVersion('graphile-worker') ?? 'not installed',
    script: 'graphile.ts',
    settings: GRAPHILE,
    writes: `durable job per run: addJob in its own transaction (inserts the next job, clears the running job's key, NOTIFYs: PostgreSQL serializes NOTIFYing commits, WAL flush included), claimed from a local queue of ${GRAPHILE.localQueueSize}, deleted in completion batches every ${GRAPHILE.completeJobBatchDelay} ms`
  },
  {
    name: 'pg-boss',
    version: installedVersion('pg-boss') ?? 'not installed',
    script: 'pgboss.ts',
    settings: PGBOSS,
    writes: `durable job per run: claimed ${PGBOSS.batchSize} at a time; per fetch, the next jobs inserted in one statement and the batch marked completed in one; a job due at once NOTIFYs and wakes all ${PGBOSS.localConcurrency} workers; completed rows kept, deleted later by maintenance`
  }
]

/** What our node writes per run, in words, with its measured rate of result statements. */
function oursWrites (r: Throughput): string {
  const flushes = r.flushes ?? 0
  return `in-memory loop, no per-run transaction; results (latest result per reaktor, and history rows as far as the history keeps up) written in batches: ≈ ${round(flushes / (r.windowMs / 1000), 1)} statements/s on the node, ≈ ${Math.round(r.runs / Math.max(1, flushes)).toLocaleString('en-US')} runs per statement`
}

/** The per-run cost of one side, as the ratio column repeats it beside every ratio. */
function costNote (label: string, r: Throughput | undefined): string {
  const c = r === undefined ? undefined : perRun(r)
  if (c === undefined) return `${label}: not measured`
  return `${label}: ${sig(c.transactions)} transactions, ${sig(c.rows)} rows, ${Math.round(c.walBytes).toLocaleString('en-US')} WAL bytes per run`
}

/** The per-run columns of a side. */
function costColumns (r: Throughput | undefined): Row {
  const c = r === undefined ? undefined : perRun(r)
  return {
    'CPU µs/run (its process)': r === undefined || !Number.isFinite(r.cpuMs) ? '' : round(r.cpuMs * 1000 / Math.max(1, r.runs), 1),
    'transactions/run': c === undefined ? '' : sig(c.transactions),
    'rows written/run': c === undefined ? '' : sig(c.rows),
    'WAL bytes/run': c === undefined ? '' : Math.round(c.walBytes)
  }
}

/** A gap statistic, or why there is none. */
function gap (value: number): number | string {
  return Number.isFinite(value) ? round(value, 1) : 'none: no reaktor ran twice'
}

/** How a peer of scenario 10 is run: what the note says, and what measureRuns is given. */
interface PeerRun { what: string, reaktors: number, intervalMs: number, behaviour: 'interval' | 'drain', windowMs: number, settleMs: number }

async function measurePeer (peer: Peer, key: string, run: PeerRun): Promise<Throughput | Error> {
  const url = await createDatabase(`bench_${key}`)
  const { reaktors, intervalMs, behaviour } = run
  const child = forkChild(key, peer.script, [JSON.stringify({ databaseUrl: url, reaktors, intervalMs, behaviour, settings: peer.settings })])
  cleanups.push(async () => await child.shutdown())
  return await measureRuns(child, reaktors, run.windowMs, run.settleMs, url).catch(async (err: Error) => {
    note(`${peer.name}, ${key}: ${err.message}`)
    await child.shutdown()
    return err
  })
}

const VERSUS = 'ours vs this (with both sides\' cost per run)'

/**
 * One table of scenario 10: ours, then each peer measured in turn in a database of its own, with
 * `columns` of each side; a peer's row adds `versus` (how ours compares) beside both sides' cost
 * per run, or, when it failed, the reason in the first column.
 */
async function peerTable (scenario: 4 | 5, o: Throughput, run: PeerRun, columns: (r: Throughput) => Row, versus: (t: Throughput) => string): Promise<Row[]> {
  const rows: Row[] = [{ system: 'reaktor-service', ...columns(o), 'how a run is written': oursWrites(o), [VERSUS]: '' }]
  const first = Object.keys(columns(o))[0]
  for (const [index, peer] of PEERS.entries()) {
    note(`scenario 10: ${peer.name}, ${run.what}`)
    const t = await measurePeer(peer, `s10_${scenario}_${index}`, run)
    results[`s10_${scenario}_${peer.name}`] = t instanceof Error ? { error: t.message } : t
    const system = `${peer.name} ${peer.version}`
    rows.push(t instanceof Error
      ? { system, [first]: `failed: ${t.message}`, 'how a run is written': peer.writes }
      : { system, ...columns(t), 'how a run is written': peer.writes, [VERSUS]: `${versus(t)} (${costNote('ours', o)}; ${costNote(peer.name, t)})` })
  }
  return rows
}

/**
 * Scenarios 4 and 5 on graphile-worker and pg-boss (bench/peers.ts: settings, job shape, and why).
 * Every side prints what one run costs the database beside its ratio: the service keeps its loop
 * in memory and writes results in batches, a job queue makes every run a durable job.
 */
async function scenario10 (ours: { s4?: Throughput, s5?: Throughput }): Promise<void> {
  const settings = `graphile-worker ${PEERS[0].version}: ${describeGraphile(GRAPHILE)}; pg-boss ${PEERS[1].version}: ${describePgBoss(PGBOSS)}`
  const perRunNote = 'per run: transactions and rows written in that side\'s own database, WAL of the server, over the window'
  results.s10 = { versions: Object.fromEntries(PEERS.map((p) => [p.name, p.version])), graphile: GRAPHILE, pgboss: PGBOSS }
  if (ours.s4 !== undefined) {
    const o = ours.s4
    const share = (r: Throughput): number => r.cycles / (P.s4Reaktors * r.windowMs / INTERVAL_MS)
    const rows = await peerTable(4, o, {
      what: `${P.s4Reaktors} self-rescheduling jobs at 3s`, reaktors: P.s4Reaktors, intervalMs: INTERVAL_MS, behaviour: 'interval', windowMs: P.s4WindowMs, settleMs: P.s4SettleMs
    }, (r) => ({
      'share of expected runs': `${round(share(r) * 100, 1)} %`,
      'gap−interval p50 ms': gap(r.gapP50),
      'gap−interval p99 ms': gap(r.gapP99),
      'every reaktor ran once after': r.allRanOnce ? `${round(r.startMs / 1000, 1)} s` : `not within ${P.catchUpMs / 1000} s`,
      'RSS MB': round(r.rss / 2 ** 20, 0),
      ...costColumns(r)
    }), (t) => `share ${round(share(o) / share(t), 2)}x; p99 gap ${Number.isFinite(t.gapP99) ? `${sig(t.gapP99 / o.gapP99)}x lower` : 'n/a'}`)
    print(`Scenario 10: scenario 4 (${P.s4Reaktors.toLocaleString('en-US')} reaktors at 3s, no-op) on job queues, each in its own process and database of the same PostgreSQL; ${settings}; ${perRunNote}`, rows)
  }
  if (ours.s5 !== undefined) {
    const o = ours.s5
    const perSecond = (r: Throughput): number => r.runs / (r.windowMs / 1000)
    const rows = await peerTable(5, o, { what: 'one job re-adding itself', reaktors: 1, intervalMs: 0, behaviour: 'drain', windowMs: P.s5WindowMs, settleMs: 1000 }, (r) => ({
      'runs/s back to back': Math.round(perSecond(r)),
      'RSS MB': round(r.rss / 2 ** 20, 0),
      ...costColumns(r)
    }), (t) => `runs/s ${round(perSecond(o) / perSecond(t), 1)}x`)
    print(`Scenario 10: scenario 5 (one reaktor returning true, back to back) on job queues, as above; ${settings}; ${perRunNote}`, rows)
  }
}

// ------------------------------------------------------------------ main

async function main (): Promise<void> {
  const started = Date.now()
  const tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'reaktor-bench-'))
  // The DATA_DIRs below are inside this folder: as root, the `postgres` user must be able to enter
  // it, or their clusters would go to EMBEDDED_POSTGRES_DIR and outlive the run.
  await fs.chmod(tmp, 0o755)
  cleanups.push(async () => await fs.rm(tmp, { recursive: true, force: true }))
  const machine = { cpus: os.cpus().length, model: os.cpus()[0]?.model, memoryGB: round(os.totalmem() / 2 ** 30, 1), node: process.version, platform: `${os.platform()} ${os.release()}` }
  const git = (...a: string[]): string => spawnSync('git', a, { cwd: ROOT, encoding: 'utf8' }).stdout?.trim() ?? ''
  const commit = git('rev-parse', '--short', 'HEAD') || 'unknown'
  const clean = git('status', '--porcelain', '--untracked-files=no') === ''
  process.stdout.write(`reaktor-service benchmark (${quick ? 'quick' : 'full'}) of commit ${commit}${clean ? '' : ' with local changes'}, \`npm run bench${args.length > 0 ? ` -- ${args.join(' ')}` : ''}\`, on ${machine.cpus} × ${machine.model}, ${machine.memoryGB} GB, Node ${machine.node}, ${machine.platform}\n`)

  embedded = await startEmbeddedPostgres({ dataDir: path.join(tmp, 'pg'), log: { info: () => {}, warn: () => {} } })
  adminUrl = embedded.adminUrl
  cleanups.push(async () => await embedded.stop())
  cleanups.push(removeScripts)

  if ([1, 2, 3, 8].some(runs)) await httpScenarios(tmp)
  const ours = await scenario4and5(tmp)
  if (runs(6)) await scenario6(tmp)
  if (runs(7)) await scenario7(tmp)
  if (runs(9)) await scenario9(tmp)
  if (runs(10)) await scenario10(ours)
  if (runs(11)) await scenario11(tmp)

  const elapsed = round((Date.now() - started) / 1000, 0)
  process.stdout.write(`\ntotal ${elapsed} s\n`)
  await fs.mkdir(RESULTS_DIR, { recursive: true })
  const json = JSON.stringify({ mode: quick ? 'quick' : 'full', commit, clean, args, at: new Date().toISOString(), elapsedSeconds: elapsed, machine, params: P, results, tables: output }, null, 2) + '\n'
  await fs.writeFile(path.join(RESULTS_DIR, 'latest.json'), json)
  if (!quick && only === undefined && clean) {
    const kept = path.join(RESULTS_DIR, `${new Date().toISOString().slice(0, 10)}-${commit}-full.json`)
    await fs.writeFile(kept, json)
    process.stdout.write(`results: ${path.relative(ROOT, kept)}\n`)
  }
}

let code = 0
try {
  await main()
} catch (err) {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`)
  code = 1
} finally {
  // Children first (newest first), the database last.
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {})
}
process.exit(code)
