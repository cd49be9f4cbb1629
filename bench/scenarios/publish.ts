/**
 * Scenario 12: publishing apps, on 3 nodes of one PostgreSQL. A 1 MiB package published to one
 * node → every node serving that version's UI and running its code; what an activation of a
 * version a node had not loaded leaves in its memory (Node cannot unload a module); and reaktors of
 * a published app at 3 s through activations alternating two stored versions, every run of every
 * node recorded (share, lateness, overlaps).
 */
import { SESSION_COOKIE } from '../../src/auth/types.js'
import { apiToken, createDatabase, INTERVAL_MS, judge, nodeOptions, note, P, print, results, startNode, until } from '../context.js'
import { LEDGER_RUN_MS, packBenchApp, VERSION_AKTOR, type PublishedBenchApp } from '../fixture.js'
import { countOverlaps, delay, median, round, runsByReaktor, sum, wallNow, windowOfRuns, type ChildHandle, type LedgerRun } from '../lib.js'
import { activationMemoryJudgment, atMostJudgment, evenlySpread, overlapJudgment, p99Judgment, SCENARIO, shareJudgment, stallJudgment, TARGETS } from '../targets.js'

const NODES = 3
const MiB = 2 ** 20
/** The app of the publish and memory parts: an aktor answering its version, and a UI. */
const UI_APP = 'bench-pub'
/** The app of the reaktors part: its polling reaktors, run by bench/node.ts through the hook. */
const RUN_APP = 'bench-runs'
/** The random bytes that make a package of the UI app 1 MiB (gzip cannot shrink them; the rest is a few hundred bytes). */
const PAD_BYTES = MiB - 1024
/** How often each node is asked whether it serves and runs a version yet. */
const POLL_MS = 20
const SWITCH_TIMEOUT_MS = 60_000
/**
 * A reaktor's period in the reaktors part: the service waits the interval after a run ends, and a
 * run takes LEDGER_RUN_MS there (long enough for overlapping runs to show), so that is what
 * "expected runs" and gap − interval count from, as 4 and 11 count from the interval of their
 * no-op runs.
 */
const PERIOD_MS = INTERVAL_MS + LEDGER_RUN_MS

interface Cluster { nodes: ChildHandle[], urls: string[], token: string, tmp: string }

const PUBLISH_DOES = 'node asked: checks and unpacks the archive, loads the app, commits the package row (its bytes), the active version and the audit row in one transaction with a NOTIFY, switches, upserts its node state; every other node, on the NOTIFY: reads the active versions, fetches the package row (sha256 checked), unpacks, loads and switches, upserts its node state'
const ACTIVATE_DOES = `node asked: commits the active version and the audit row in one transaction with a NOTIFY; every node: reads the active versions, loads the version (fetched and unpacked first where it was not; its module imported once per node), swaps the registrations in place (one transaction over their rows, which exist: nothing changes), upserts its node state; runs of ${LEDGER_RUN_MS} ms, results batched as in 11`

/** A call of the bench admin to `url`, a package (gzip) or JSON body; throws unless it answers `expect`. */
async function call (url: string, token: string, expect: number, body?: Buffer | object): Promise<Record<string, unknown>> {
  const headers: Record<string, string> = { 'x-service-token': token }
  if (body !== undefined) headers['content-type'] = Buffer.isBuffer(body) ? 'application/gzip' : 'application/json'
  const res = await fetch(url, { method: body === undefined ? 'GET' : 'POST', headers, body: body === undefined ? undefined : Buffer.isBuffer(body) ? new Uint8Array(body) : JSON.stringify(body) })
  const text = await res.text()
  if (res.status !== expect) throw new Error(`${url}: ${res.status} (${expect} expected): ${text}`)
  return JSON.parse(text) as Record<string, unknown>
}

async function publish (c: Cluster, via: number, bytes: Buffer, activate = true): Promise<void> {
  await call(`${c.urls[via]}/api/v1/apps${activate ? '' : '?activate=false'}`, c.token, 201, bytes)
}

/** Whether the node at `url` serves the UI of `version` (with the session cookie, as scenarios 1 and 2 ask). */
async function servesUi (url: string, token: string, version: string): Promise<boolean> {
  const res = await fetch(`${url}/app-ui/${UI_APP}@${version}/`, { headers: { cookie: `${SESSION_COOKIE}=${token}` } })
  return res.status === 200 && (await res.text()).includes(`version ${version}`)
}

/** Whether the node at `url` runs the code of `version`: its aktor answers that version. */
async function runsCode (url: string, token: string, version: string): Promise<boolean> {
  const res = await fetch(`${url}/api/v1/aktor/${VERSION_AKTOR}`, { method: 'POST', headers: { 'x-service-token': token, 'content-type': 'application/json' }, body: '{}' })
  if (res.status !== 200) { await res.arrayBuffer(); return false }
  return (await res.json() as { version?: string }).version === version
}

/** Milliseconds from `t0` until the node at `url` runs `version` (and, with `ui`, serves its UI), asked every POLL_MS. */
async function readyAfter (url: string, token: string, version: string, t0: number, ui: boolean): Promise<number> {
  let served = !ui
  for (;;) {
    served ||= await servesUi(url, token, version)
    if (served && await runsCode(url, token, version)) return wallNow() - t0
    if (wallNow() - t0 > SWITCH_TIMEOUT_MS) throw new Error(`${url} did not ${served ? 'run' : 'serve the UI of'} ${UI_APP}@${version} within ${SWITCH_TIMEOUT_MS} ms of its publish`)
    await delay(POLL_MS)
  }
}

/** Publishes `bytes` of `version` to node `via` and waits for every node: when it answered, and each node's ready time. */
async function publishEverywhere (c: Cluster, via: number, version: string, bytes: Buffer, ui: boolean): Promise<{ answeredMs: number, perNode: number[] }> {
  const t0 = wallNow()
  const [answeredMs, perNode] = await Promise.all([
    publish(c, via, bytes).then(() => wallNow() - t0),
    Promise.all(c.urls.map(async (url) => await readyAfter(url, c.token, version, t0, ui)))
  ])
  return { answeredMs, perNode }
}

const uiApp = (version: string): PublishedBenchApp => ({ name: UI_APP, version, reaktors: 0, padBytes: PAD_BYTES })

async function publishLatency (c: Cluster): Promise<void> {
  note(`scenario 12: ${P.s12Publishes} publishes of a 1 MiB package`)
  // The app's first version makes it known to every node: not one of the samples.
  await publishEverywhere(c, 0, '0.1.0', await packBenchApp(c.tmp, uiApp('0.1.0')), true)
  const samples: Array<{ version: string, via: number, bytes: number, answeredMs: number, perNode: number[], everyNodeMs: number }> = []
  for (let k = 0; k < P.s12Publishes; k++) {
    const version = `1.0.${k}`
    const bytes = await packBenchApp(c.tmp, uiApp(version))
    const via = k % NODES
    const { answeredMs, perNode } = await publishEverywhere(c, via, version, bytes, true)
    samples.push({ version, via, bytes: bytes.length, answeredMs, perNode, everyNodeMs: Math.max(...perNode) })
  }
  const every = samples.map((s) => s.everyNodeMs)
  const answered = samples.map((s) => s.answeredMs)
  const max = Math.max(...every)
  print(`Scenario 12: publish of a 1 MiB package (random bytes in public/) to one node, in turn, of 3 on one database → every node answers the new version's UI (HTTP 200 with the session cookie) and its aktor answers the new version (each node asked every ${POLL_MS} ms); after a first version of the app, not measured`, [{
    publishes: samples.length,
    'package KiB': round(median(samples.map((s) => s.bytes)) / 1024, 0),
    'answered p50 ms': round(median(answered), 0),
    'answered max ms': round(Math.max(...answered), 0),
    'every node p50 ms': round(median(every), 0),
    'every node max ms': round(max, 0),
    target: `max ≤ ${TARGETS.s12.publishMaxMs.toLocaleString('en-US')} ms`,
    met: judge(atMostJudgment(SCENARIO.s12publish, `publish → every node serves the UI and runs the new version, max of ${samples.length}`, max, TARGETS.s12.publishMaxMs, ' ms')),
    'per publish': PUBLISH_DOES
  }])
  results.s12_publish = { samples, p50: median(every), max }
}

async function memories (c: Cluster): Promise<Array<{ rss: number, heapUsed: number, gc: boolean }>> {
  const replies = await Promise.all(c.nodes.map(async (node) => await node.request({ type: 'memory' })))
  return replies.map((r) => ({ rss: Number(r.rss), heapUsed: Number(r.heapUsed), gc: r.gc === true }))
}

async function memoryPerActivation (c: Cluster): Promise<void> {
  const n = P.s12MemoryActivations
  note(`scenario 12: memory over ${n} activations of versions not loaded before`)
  const before = await memories(c)
  for (let k = 0; k < n; k++) {
    const version = `2.0.${k}`
    await publishEverywhere(c, k % NODES, version, await packBenchApp(c.tmp, uiApp(version)), false)
  }
  const after = await memories(c)
  const gc = [...before, ...after].every((m) => m.gc)
  const rssPer = after.map((m, i) => (m.rss - before[i].rss) / MiB / n)
  const heapPer = after.map((m, i) => (m.heapUsed - before[i].heapUsed) / MiB / n)
  const worst = Math.max(...rssPer)
  const mib = (values: number[], digits: number): string => values.map((v) => round(v, digits)).join(' / ')
  print(`Scenario 12: memory of each node over ${n} activations of versions of the same app it had not loaded (each published to one node in turn, every node running it before the next); RSS and live heap ${gc ? 'after two forced full GCs (--expose-gc)' : 'without a forced GC (the nodes cannot be asked for one)'}, before and after`, [{
    activations: n,
    'RSS before MiB': mib(before.map((m) => m.rss / MiB), 0),
    'RSS after MiB': mib(after.map((m) => m.rss / MiB), 0),
    'RSS per activation MiB': mib(rssPer, 2),
    'live heap per activation MiB': mib(heapPer, 2),
    target: `≤ ${TARGETS.s12.rssPerActivationMiB} MiB (worst node)`,
    met: judge(activationMemoryJudgment(worst, n, gc)),
    'per activation': `${PUBLISH_DOES}; no UI asked for`
  }])
  results.s12_memory = { activations: n, gc, before, after, rssPerMiB: rssPer, heapPerMiB: heapPer, worstMiB: worst }
}

/** Polls the app's node states (through the first node) until every node runs `version`; ms from `t0`. */
async function everyNodeRuns (c: Cluster, version: string, t0: number): Promise<number> {
  for (;;) {
    const shown = await call(`${c.urls[0]}/api/v1/apps/${RUN_APP}`, c.token, 200)
    const nodes = shown.nodes as Array<{ version: string | null, error: string | null }>
    if (nodes.length >= NODES && nodes.every((s) => s.version === version && s.error === null)) return wallNow() - t0
    if (wallNow() - t0 > SWITCH_TIMEOUT_MS) throw new Error(`not every node ran ${RUN_APP}@${version} within ${SWITCH_TIMEOUT_MS} ms of its activation: ${JSON.stringify(nodes)}`)
    await delay(POLL_MS)
  }
}

async function ownedPerNode (c: Cluster): Promise<number[]> {
  return await Promise.all(c.nodes.map(async (node) => Number((await node.request({ type: 'stats' })).owned)))
}

async function runsThroughActivations (c: Cluster): Promise<void> {
  const n = P.s12Reaktors
  const count = P.s12Activations
  const label = `${n.toLocaleString('en-US')} at 3s, ${count} activations`
  note(`scenario 12: ${label} (window ${P.s12WindowMs / 1000} s)`)
  const versions = ['1.0.0', '2.0.0']
  const runApp = (version: string): PublishedBenchApp => ({ name: RUN_APP, version, reaktors: n, padBytes: 0 })
  await publish(c, 0, await packBenchApp(c.tmp, runApp(versions[0])))
  await publish(c, 0, await packBenchApp(c.tmp, runApp(versions[1])), false)
  const t0 = Date.now()
  await until(`an even spread of the ${n} reaktors of ${RUN_APP} over ${NODES} nodes`, 120_000, async () => {
    const owned = await ownedPerNode(c)
    return sum(owned) === n && evenlySpread(owned, n)
  })
  const spreadMs = Date.now() - t0
  // A period on the settled owners, then one more recorded: every reaktor's last start before the window.
  await delay(PERIOD_MS + 1000)
  await Promise.all(c.nodes.map(async (node) => await node.request({ type: 'watch' })))
  await delay(PERIOD_MS + 1000)
  const from = wallNow()
  const switches: Array<{ atMs: number, version: string, via: number, answeredMs: number, everyNodeMs: number }> = []
  for (let k = 0; k < count; k++) {
    await delay(from + P.s12WindowMs * (k + 0.5) / count - wallNow())
    const version = versions[(k + 1) % 2]
    const via = k % NODES
    const t = wallNow()
    await call(`${c.urls[via]}/api/v1/apps/${RUN_APP}/activate`, c.token, 200, { version })
    const answeredMs = wallNow() - t
    switches.push({ atMs: t - from, version, via, answeredMs, everyNodeMs: await everyNodeRuns(c, version, t) })
  }
  await delay(from + P.s12WindowMs - wallNow())
  const to = wallNow()
  const ledgers = await Promise.all(c.nodes.map(async (node) => await node.request({ type: 'ledger' })))
  const owned = await ownedPerNode(c)
  // Runs still in flight end, for the overlap count, when their node was asked.
  const runs = ledgers.flatMap((l) => [...(l.runs as LedgerRun[]), ...(l.inFlight as Array<[number, number]>).map(([i, start]): LedgerRun => [i, start, Number(l.at)])])
  // Reaktors may change node during a switch: the window is of every node's runs together.
  const w = windowOfRuns(runs, n, PERIOD_MS, from, to, TARGETS.s12.p99Ms)
  const windowMs = to - from
  const expected = n * windowMs / PERIOD_MS
  const share = w.cycles / expected
  const overlaps = countOverlaps(runsByReaktor(runs))
  const byVersion = versions.map((v) => sum(ledgers, (l) => Number((l.byVersion as Record<string, number>)[v] ?? 0)))
  const scenario = SCENARIO.s12switch(label)
  print(`Scenario 12: ${label} of a published app on 3 nodes, runs of ${LEDGER_RUN_MS} ms (so a period of ${PERIOD_MS.toLocaleString('en-US')} ms: the interval counts from a run's end, and "expected runs" and gap−interval count from that period), their phases spread over the period before the window (each one's first run on a node waits i/n of an interval) so that a switch finds runs in flight, every run of every node recorded (from a period before the window); activations alternating two stored versions, spread over the window, each sent to one node in turn; gap−interval over every node's runs together, a reaktor that did not run again counting as infinite`, [{
    reaktors: n,
    'window s': round(windowMs / 1000, 1),
    activations: count,
    'runs by version': versions.map((v, i) => `${v}: ${byVersion[i]}`).join(', '),
    'expected runs': Math.round(expected),
    'runs, phase-corrected': Math.round(w.cycles),
    share: `${round(share * 100, 1)} %`,
    'did not run again': w.stalled,
    'gap−interval p50 ms': round(w.gapP50, 1),
    'gap−interval p99 ms': round(w.gapP99, 1),
    'max ms': round(w.gapMax, 1),
    'ledger runs': runs.length,
    overlaps,
    'owned per node (end)': owned.join(' / '),
    'spread after s': round(spreadMs / 1000, 1),
    target: `≥ ${TARGETS.s12.share * 100} %, p99 ≤ ${TARGETS.s12.p99Ms} ms, none stalled, no overlap`,
    met: judge(shareJudgment(scenario, share, TARGETS.s12.share), p99Judgment(scenario, ` (every node's runs, from the ${PERIOD_MS.toLocaleString('en-US')} ms period)`, w.gapP99, TARGETS.s12.p99Ms), stallJudgment(scenario, w.stalled), overlapJudgment(scenario, overlaps)),
    'per activation': ACTIVATE_DOES
  }])
  print('Scenario 12: the activations of that window (answered: by the node asked, once it had switched; every node: until the app\'s node states, read through the first node, show every node on the version)', switches.map((s) => ({
    'at s': round(s.atMs / 1000, 1),
    version: s.version,
    'sent to node': s.via,
    'answered ms': Math.round(s.answeredMs),
    'every node ms': Math.round(s.everyNodeMs)
  })))
  results.s12_runs = { label, reaktors: n, activations: count, windowMs, expected, cycles: w.cycles, runs: w.runs, share, gapP50: w.gapP50, gapP99: w.gapP99, gapMax: w.gapMax, stalled: w.stalled, overlaps, ledgerRuns: runs.length, byVersion: Object.fromEntries(versions.map((v, i) => [v, byVersion[i]])), owned, spreadMs, switches }
}

export async function scenario12 (tmp: string): Promise<void> {
  note('scenario 12: publishing apps on 3 nodes')
  const db = await createDatabase('bench_s12')
  const nodes: ChildHandle[] = []
  for (let i = 0; i < NODES; i++) {
    const opts = nodeOptions(db, tmp, { nodeId: `s12-${i}`, reaktors: P.s12Reaktors, behaviour: 'ledger', published: true, listen: true })
    nodes.push(startNode(`s12-${i}`, opts, ['--expose-gc']))
    // One at a time: the first migrates the database.
    await nodes[i].ready
  }
  const urls = await Promise.all(nodes.map(async (node) => String((await node.ready).url)))
  const c: Cluster = { nodes, urls, token: await apiToken(urls[0]), tmp }
  await publishLatency(c)
  // Before the reaktors: their runs and the ledger would grow the nodes' memory meanwhile.
  await memoryPerActivation(c)
  await runsThroughActivations(c)
  await Promise.all(nodes.map(async (node) => await node.shutdown()))
}
