/**
 * Scenarios 1, 2, 3 and 8: HTTP through wrk, the service against the Node ceiling of each request
 * (a bare Fastify route answering the same), and, for context, @fastify/static and nginx serving
 * the same bytes from files. wrk runs on core 1, every server under test on core 0 (taskset).
 */
import { spawnSync } from 'node:child_process'
import fs from 'node:fs/promises'
import path from 'node:path'
import { apiToken, createDatabase, cleanups, flags, judge, note, P, print, profileArgv, results, runs } from '../context.js'
import { BENCH_APP, ECHO_BODY, JS_BYTES, reaktorId, writeBenchApp } from '../fixture.js'
import { forkChild, mean, round, sum, type Row } from '../lib.js'
import { CORES, load, pinning, wrkCommand, type LoadOptions, type LoadResult } from '../load.js'
import { startNginx, type Nginx } from '../nginx.js'
import type { Captured } from '../servers.js'
import { ratioJudgment, SCENARIO, TARGETS } from '../targets.js'

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
  const peers = [s.ours, s.reference, ...(flags.withContext ? s.context : [])]
  const rounds = await measureRounds(peers)
  const ratios = rounds[0].map((l, r) => l.requestsPerSecond / rounds[1][r].requestsPerSecond)
  const ratio = mean(rps(rounds[0])) / mean(rps(rounds[1]))
  return peers.map((peer, i): Row => {
    const list = rounds[i]
    const failed = failedIn(list)
    const judged = i === 0 && s.target !== undefined
    return {
      scenario: s.scenario,
      server: peer.label,
      'req/s': Math.round(mean(rps(list))),
      'min–max': spread(rps(list)),
      'p50 ms': round(mean(list.map((l) => l.latencyP50)), 2),
      'p99 ms': round(mean(list.map((l) => l.latencyP99)), 2),
      'bytes/answer': Math.round(mean(list.map((l) => l.bytesPerResponse))),
      failed,
      'of ceiling': i === 0 ? `${round(ratio, 2)}x (${spread(ratios, 2)})` : i === 1 ? '1x' : `${round(mean(rps(list)) / mean(rps(rounds[1])), 2)}x`,
      target: judged ? `≥ ${s.target}x` : '',
      met: judged ? judge(ratioJudgment(s.scenario, ratio, failed, s.target ?? 0)) : '',
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

/** How the load is placed, as the titles say it. */
function placement (): string {
  return pinning() ? `wrk on core ${CORES.generator}, the servers on core ${CORES.server} (taskset)` : 'not pinned (fewer than 2 cores)'
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
  print(`Generator ceiling: ${wrkVersion()}, 1 thread, ${P.connections} connections, ${P.httpSeconds} s × ${P.rounds} rounds, against nginx (a server in C, 1 worker), ${placement()}. A rate near these would be the generator's limit, not the server's`, rows)
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

export async function httpScenarios (tmp: string): Promise<void> {
  const publicDir = await writeBenchApp(path.join(tmp, 'bench-app'))
  const databaseUrl = await createDatabase('bench_http')
  const dataDir = path.join(tmp, 'http-data')
  const pin = { core: CORES.server }
  const service = forkChild('service', 'servers.ts', ['service', JSON.stringify({ publicDir, databaseUrl, dataDir })], { execArgv: profileArgv(), ...pin })
  cleanups.push(async () => await service.shutdown())
  const ours = String((await service.ready).url)

  const token = await apiToken(ours)
  const cookie = { cookie: `reaktor_session=${token}` }
  const auth = { 'x-service-token': token }
  const app = `/app-ui/${BENCH_APP.name}@${BENCH_APP.version}/`
  const statusPath = `/api/v1/polling/${reaktorId(7)}/status`

  // The references answer exactly what the service answers: bytes and headers.
  const js = await capture(`${ours}${app}app.js`, cookie)
  const html = await capture(`${ours}${app}`, cookie)
  const status = await capture(`${ours}${statusPath}`, auth)
  const jsBytes = Buffer.from(js.body, 'base64')
  const htmlBytes = Buffer.from(html.body, 'base64')
  if (jsBytes.length !== JS_BYTES) throw new Error('app.js is not the size meant')
  if (!htmlBytes.toString().includes('getServiceAuthToken')) throw new Error('the HTML page has no token helper')
  const list = await (await fetch(`${ours}/api/v1/polling`, { headers: auth })).json() as { pollingReaktors: unknown[] }
  if (list.pollingReaktors.length !== 50) throw new Error(`expected 50 reaktors, got ${list.pollingReaktors.length}`)
  // The same bytes as files, for @fastify/static and nginx.
  const sameDir = path.join(tmp, 'same-bytes')
  await fs.mkdir(sameDir, { recursive: true, mode: 0o755 })
  await fs.writeFile(path.join(sameDir, 'app.js'), jsBytes)
  await fs.writeFile(path.join(sameDir, 'index.html'), htmlBytes)

  const bare = forkChild('bare', 'servers.ts', ['bare', JSON.stringify({ publicDir: sameDir })], { execArgv: profileArgv(), ...pin })
  cleanups.push(async () => await bare.shutdown())
  const base = String((await bare.ready).url)
  await bare.request({ type: 'setJson', list, same: { js, html, status } })
  const { 'content-type': _t, 'content-length': _l, etag: _e, ...sameHeaders } = js.headers
  const nginx = await startNginx(path.join(tmp, 'nginx'), sameDir, sameHeaders)
  cleanups.push(nginx.stop)

  if ((runs(1) || runs(2)) && flags.withContext) await generatorCeiling(nginx)

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
    appUiFile(1, SCENARIO.appScript, TARGETS.http.appScript, 'app.js', 'app.js', 'js'),
    appUiFile(2, SCENARIO.appPage, TARGETS.http.appPage, '', 'index.html', 'html'),
    {
      n: 3,
      scenario: SCENARIO.status,
      target: TARGETS.http.status,
      ours: { label: 'reaktor-service', options: { url: `${ours}${statusPath}`, headers: auth }, does: 'token checked, JSON from the status cache' },
      // The service sends the status from cached bytes: so does its ceiling, so the ratio measures
      // the token check and the routing, not a serialization only one side does.
      reference: { label: 'bare Fastify route', options: { url: `${base}/same/status` }, does: 'same bytes and headers from memory' },
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
  print(`Scenarios 1, 2, 3, 8: HTTP through ${wrkVersion()} (1 thread, ${P.connections} connections), ${placement()}, ${P.httpSeconds} s × ${P.rounds} alternating rounds per server after a ${P.warmupSeconds} s warm-up; req/s: mean of the rounds (min–max); "of ceiling": ours / the bare Fastify route, ratio of the means (per-round min–max). None of them writes to the database`, rows)
  results.http = rows
  await Promise.all([service.shutdown(), bare.shutdown(), nginx.stop()])
}
