/**
 * Publishing an app to a running cluster: three nodes in this process on one database, each with
 * its own DATA_DIR and no apps folder, run an app of 300 polling reaktors published through one of
 * them. Every run of the app's code goes into one ledger (reaktor, version, node, start, end, abort
 * reason), shared in memory by the three nodes; on it the test proves, across each switch, that no
 * two runs of a reaktor overlapped, that no handover aborted a run, and that no reaktor waited
 * much longer than its interval. A version one node cannot load (a file only its DATA_DIR holds
 * makes the entry module throw) leaves that node on the previous version, says so in the API, and
 * moves the app's reaktors to the nodes that run the active one; nodes built again on fresh
 * DATA_DIRs run the active version, fetched from the database.
 */
import fs from 'node:fs/promises'
import path from 'node:path'
import { create } from 'tar'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { SCHEDULER_DEFAULTS } from '../../src/scheduler/options.js'
import { ADMIN_ENV, apiAs, loginToken } from '../helpers/auth.js'
import { build, testConfig } from '../helpers/app.js'
import { createTestDatabase } from '../helpers/database.js'
import { FAST_SCHEDULER } from '../helpers/scheduler.js'
import { tempDir } from '../helpers/temp-dir.js'
import type { TestContext } from '../helpers/test-context.js'
import { bound, deadline, waitFor } from '../helpers/timing.js'

const APP = 'pub-cluster'
const NODES = ['node-a', 'node-b', 'node-c'] as const
const N = 300
const INTERVAL_MS = 250
/** How long a run works: long enough that a switch or a handover finds runs in flight. */
const RUN_MS = 20
/** Ids of version 1; version 2 drops the last and adds ADDED. */
const IDS = Array.from({ length: N }, (_v, i) => `pub-${String(i).padStart(3, '0')}`)
const DROPPED = IDS[N - 1]
const ADDED = 'pub-added'
const IDS_2 = [...IDS.slice(0, N - 1), ADDED]
/** A file that, in a node's DATA_DIR, keeps version 3.0.0 from loading there. */
const REFUSE = 'refuse-pub-cluster-3'
/**
 * A switch's window in the ledger lasts this long at least: ten reconcile passes of the test
 * scheduler, so that the handovers a switch sets off (eligibility, the spread evening out) fall in it.
 */
const OBSERVE_MS = 2000
/** Where the app's code finds the ledger (the nodes share this process). */
const LEDGER_KEY = '__appPublishLedger'

interface LedgerRun { id: string, version: string, node: string, start: number, end?: number, aborted?: string }

/**
 * The app's files: every polling reaktor records its runs in the ledger (the node comes from the
 * setting `node`, which each node's environment sets); the aktor `pub-which` answers the version
 * and the node. `refusing`: the entry module throws at import when REFUSE is in its DATA_DIR (the
 * package is unpacked in DATA_DIR/apps/<folder>/).
 */
function files (version: string, ids: readonly string[], refusing = false): Record<string, string> {
  const refuse = refusing
    ? `if (existsSync(new URL('../../${REFUSE}', import.meta.url))) throw new Error('${REFUSE} is in this node\\'s DATA_DIR: version ${version} does not run here')\n`
    : ''
  return {
    'package.json': JSON.stringify({ name: APP, version, type: 'module', main: 'index.js', reaktor: { settings: { node: '' } } }),
    'index.js': `import { existsSync } from 'node:fs'
${refuse}const VERSION = '${version}'
const ledger = globalThis.${LEDGER_KEY} ??= []
const work = (signal) => new Promise((resolve) => {
  const timer = setTimeout(resolve, ${RUN_MS})
  signal.addEventListener('abort', () => { clearTimeout(timer); resolve() }, { once: true })
})
const aktor = (id) => async (_input, context) => {
  const entry = { id, version: VERSION, node: context.settings.node, start: performance.now() }
  ledger.push(entry)
  const { signal } = context
  signal.addEventListener('abort', () => { entry.aborted = String(signal.reason?.message ?? signal.reason) }, { once: true })
  await work(signal)
  entry.end = performance.now()
  return false
}
export const pollingReaktors = ${JSON.stringify(ids)}.map((id) => ({ reaktorDefinitionId: id, interval: '${INTERVAL_MS}ms', autoStart: true, createReaktor: () => aktor(id) }))
export const reaktors = [{ reaktorDefinitionId: 'pub-which', createReaktor: () => async (_input, context) => ({ version: VERSION, node: context.settings.node }) }]
`
  }
}

/**
 * The package of these files as `npm pack` lays it out (gzip, every entry under package/), written
 * here rather than by npm: three npm processes cost seconds of the two busy cores (the output of
 * `npm pack` itself is published in test/api/apps-publish.test.ts).
 */
async function pack (t: TestContext, contents: Record<string, string>): Promise<Buffer> {
  const dir = await tempDir(t, 'pub-cluster-app-')
  await fs.mkdir(path.join(dir, 'package'))
  for (const [name, text] of Object.entries(contents)) await fs.writeFile(path.join(dir, 'package', name), text)
  await create({ gzip: true, portable: true, cwd: dir, file: path.join(dir, 'app.tgz') }, ['package'])
  return await fs.readFile(path.join(dir, 'app.tgz'))
}

interface Node { id: string, app: FastifyInstance, dataDir: string, token: string }
type Answer = { statusCode: number, body: any }

/** A node on the database: a new DATA_DIR, an empty apps folder, its id in the setting `node`. */
async function startNode (t: TestContext, databaseUrl: string, id: string): Promise<Node> {
  const appsDir = await tempDir(t, 'pub-cluster-no-apps-')
  const config = await testConfig(t, { ...ADMIN_ENV, NODE_ID: id, REAKTOR_APPS_DIR: appsDir, REAKTOR_SETTING_PUB_CLUSTER_NODE: id })
  const app = await build(t, { config, databaseUrl, scheduler: FAST_SCHEDULER })
  return { id, app, dataDir: config.dataDir, token: await loginToken(app) }
}

async function call (node: Node, method: 'GET' | 'POST', url: string, body?: object): Promise<Answer> {
  return await apiAs(node.app, node.token)(method, `/api/v1${url}`, body)
}

/** What each node runs of the app, by GET /apps/{name} through `via`: `version` or `version!error`. */
async function nodeStates (via: Node): Promise<Record<string, string>> {
  const { body } = await call(via, 'GET', `/apps/${APP}`)
  return Object.fromEntries((body.nodes as Array<{ nodeId: string, version: string | null, error: string | null }>)
    .map((n) => [n.nodeId, n.error === null ? String(n.version) : `${String(n.version)}!${n.error}`]))
}

/** Owner of each listed reaktor, as GET /polling shows it through `via`. */
async function owners (via: Node): Promise<Map<string, string | null>> {
  const { body } = await call(via, 'GET', '/polling')
  return new Map((body.pollingReaktors as Array<{ reaktorDefinitionId: string, owner: string | null }>).map((s) => [s.reaktorDefinitionId, s.owner]))
}

/** Pairs of runs of one reaktor that overlap (a run without an end overlaps every later run). */
function overlaps (ledger: readonly LedgerRun[]): string[] {
  const found: string[] = []
  for (const runs of byReaktor(ledger).values()) {
    for (let i = 1; i < runs.length; i++) {
      const [a, b] = [runs[i - 1], runs[i]]
      if (a.end === undefined || a.end > b.start) found.push(`${a.id}: ${a.node} v${a.version} ${a.start.toFixed(1)}..${a.end?.toFixed(1) ?? '-'} and ${b.node} v${b.version} from ${b.start.toFixed(1)}`)
    }
  }
  return found
}

function byReaktor (ledger: readonly LedgerRun[]): Map<string, LedgerRun[]> {
  const runs = new Map<string, LedgerRun[]>()
  for (const r of ledger) {
    const list = runs.get(r.id)
    if (list === undefined) runs.set(r.id, [r])
    else list.push(r)
  }
  for (const list of runs.values()) list.sort((a, b) => a.start - b.start)
  return runs
}

/**
 * How much later than its schedule each of `ids` ran within [from, to] (performance.now()): a run
 * is due one interval after the previous one ended, and at `to` the next one is due unless it is
 * not yet an interval since the last. The worst excesses, largest first.
 */
function lateness (ledger: readonly LedgerRun[], ids: readonly string[], from: number, to: number): Array<{ id: string, excessMs: number, at: string }> {
  const runs = byReaktor(ledger)
  const late: Array<{ id: string, excessMs: number, at: string }> = []
  for (const id of ids) {
    const list = (runs.get(id) ?? []).filter((r) => r.start >= from - INTERVAL_MS - RUN_MS && r.start <= to)
    let worst = { id, excessMs: Number.NEGATIVE_INFINITY, at: 'no run' }
    for (let i = 1; i <= list.length; i++) {
      const prev = list[i - 1]
      const next = list[i]?.start ?? to
      if (prev.end === undefined) continue
      const excess = next - prev.end - INTERVAL_MS
      if (excess > worst.excessMs) worst = { id, excessMs: Math.round(excess), at: `after ${prev.node} v${prev.version} at ${Math.round(prev.end - from)} ms, ${list[i] === undefined ? 'none until the window ended' : `then ${list[i].node} v${list[i].version}`}` }
    }
    late.push(worst)
  }
  return late.sort((a, b) => b.excessMs - a.excessMs)
}

t.test('an app published to a running cluster of three: switches, a node that cannot follow, a restart', async (t) => {
  const ledger: LedgerRun[] = []
  const global = globalThis as Record<string, unknown>
  global[LEDGER_KEY] = ledger
  t.teardown(() => { delete global[LEDGER_KEY] })
  const databaseUrl = await createTestDatabase(t)
  const [v1, v2, v3] = await Promise.all([pack(t, files('1.0.0', IDS)), pack(t, files('2.0.0', IDS_2)), pack(t, files('3.0.0', IDS_2, true))])
  /** One after the other: three starts at once can outlast Fastify's plugin timeout on busy cores. */
  const startAll = async (): Promise<Node[]> => {
    const started: Node[] = []
    for (const id of NODES) started.push(await startNode(t, databaseUrl, id))
    return started
  }
  let nodes = await startAll()
  const [a, , c] = nodes
  const figures: Record<string, unknown> = {}
  /** The worst excess allowed over a reaktor's interval (compared with <), and why, in the ledger subtest. */
  const allowedMs = bound(FAST_SCHEDULER.reconcileIntervalMs, 'seconds', { below: SCHEDULER_DEFAULTS.orphanGraceMs - INTERVAL_MS })
  const windows: Record<string, [number, number, readonly string[]]> = {}
  const since = (at: number, pick: (r: LedgerRun) => boolean = () => true): LedgerRun[] => ledger.filter((r) => r.start >= at && pick(r))
  const allRan = (at: number, ids: readonly string[], version: string): boolean => {
    const ran = new Set(since(at, (r) => r.version === version).map((r) => r.id))
    return ids.every((id) => ran.has(id))
  }
  const observed = async (from: number, what: string): Promise<number> => await waitFor(() => performance.now() - from >= OBSERVE_MS ? performance.now() : undefined,
    { timeoutMs: OBSERVE_MS + deadline(1000), intervalMs: 50, what })
  const statesAre = (want: Record<string, string | RegExp>) => async (): Promise<Record<string, string> | undefined> => {
    const states = await nodeStates(nodes[0])
    return Object.keys(states).length === NODES.length && NODES.every((n) => typeof want[n] === 'string' ? states[n] === want[n] : (want[n] as RegExp).test(states[n] ?? '')) ? states : undefined
  }

  await t.test('version 1 published through one node runs on all three', async (t) => {
    const publishedAt = performance.now()
    const res = await call(a, 'POST', '/apps', v1)
    t.match(res, { statusCode: 201, body: { name: APP, version: '1.0.0', stored: true, activated: true, previous: null } })
    const states = await waitFor(statesAre({ 'node-a': '1.0.0', 'node-b': '1.0.0', 'node-c': '1.0.0' }), { what: 'every node on 1.0.0' })
    t.same(states, { 'node-a': '1.0.0', 'node-b': '1.0.0', 'node-c': '1.0.0' }, 'GET /apps/{name}: every node runs 1.0.0')
    for (const node of nodes) t.same((await call(node, 'POST', '/aktor/pub-which', {})).body, { version: '1.0.0', node: node.id })
    await waitFor(() => allRan(publishedAt, IDS, '1.0.0'), { timeoutMs: deadline(20_000), what: `all ${N} reaktors to run version 1` })
    await waitFor(() => NODES.every((n) => ledger.some((r) => r.node === n && r.version === '1.0.0')), { timeoutMs: deadline(20_000), what: 'runs on every node' })
    t.pass(`all ${N} reaktors ran, on ${NODES.join(', ')}`)
  })

  await t.test('version 2: every node switches; the dropped reaktor stops, the added one runs', async (t) => {
    const publishedAt = performance.now()
    const res = await call(a, 'POST', '/apps', v2)
    t.match(res, { statusCode: 201, body: { version: '2.0.0', previous: '1.0.0', activated: true } })
    await waitFor(statesAre({ 'node-a': '2.0.0', 'node-b': '2.0.0', 'node-c': '2.0.0' }), { what: 'every node on 2.0.0' })
    const switchedAt = performance.now()
    figures.switch2Ms = Math.round(switchedAt - publishedAt)
    for (const node of nodes) t.same((await call(node, 'POST', '/aktor/pub-which', {})).body, { version: '2.0.0', node: node.id }, `${node.id} answers with version 2`)
    await waitFor(() => allRan(switchedAt, IDS_2, '2.0.0'), { timeoutMs: deadline(20_000), what: 'every reaktor of version 2 to run it' })
    t.same(new Set(since(switchedAt, (r) => r.version === '2.0.0').map((r) => r.node)), new Set(NODES), 'version 2 runs on every node')
    t.same(since(switchedAt, (r) => r.version === '1.0.0').map((r) => `${r.id}@${r.node}`), [], 'no run of version 1 started once every node had switched')
    t.same(since(switchedAt, (r) => r.id === DROPPED).map((r) => `${r.node} v${r.version}`), [], `${DROPPED} ran no more`)
    for (const node of nodes) {
      t.equal((await call(node, 'GET', `/polling/${DROPPED}/status`)).statusCode, 404, `${node.id}: ${DROPPED} is not registered`)
      const listed = await owners(node)
      t.ok(!listed.has(DROPPED) && listed.has(ADDED) && listed.size === N, `${node.id} lists ${listed.size} reaktors: ${ADDED}, not ${DROPPED}`)
    }
    const rows = await a.app.db.selectFrom('polling_reaktors').select(['reaktor_id', 'state']).where('reaktor_id', 'in', [DROPPED, ADDED]).orderBy('reaktor_id').execute()
    t.same(Object.fromEntries(rows.map((r) => [r.reaktor_id, r.state])), { [ADDED]: 'running', [DROPPED]: 'stopped' }, 'stored: the added one running, the dropped one stopped')
    windows['version 2'] = [publishedAt, await observed(publishedAt, 'the window of version 2'), IDS_2.filter((id) => id !== ADDED)]
  })

  await t.test('version 3 cannot load on node-c: it keeps version 2, says why, and hands the app\'s reaktors over', async (t) => {
    await fs.writeFile(path.join(c.dataDir, REFUSE), '')
    const publishedAt = performance.now()
    const res = await call(a, 'POST', '/apps', v3)
    t.match(res, { statusCode: 201, body: { version: '3.0.0', previous: '2.0.0', activated: true } })
    const states = await waitFor(statesAre({ 'node-a': '3.0.0', 'node-b': '3.0.0', 'node-c': /^2\.0\.0!/ }), { what: 'node-a and node-b on 3.0.0, node-c on 2.0.0 with an error' })
    t.match(states['node-c'], `2.0.0!app ${APP}@3.0.0: entry module "index.js" failed to import: `, 'node-c keeps 2.0.0 and the API says why')
    t.match(states['node-c'], `${REFUSE} is in this node's DATA_DIR: version 3.0.0 does not run here`)
    t.same((await call(a, 'GET', `/apps/${APP}`)).body.activeVersion, '3.0.0')
    for (const node of nodes) {
      const version = node === c ? '2.0.0' : '3.0.0'
      t.same((await call(node, 'POST', '/aktor/pub-which', {})).body, { version, node: node.id }, `${node.id} answers with version ${version}`)
    }
    const moved = await waitFor(async () => {
      const shown = await Promise.all(nodes.map(async (node) => await owners(node)))
      return shown.every((m) => IDS_2.every((id) => m.get(id) === 'node-a' || m.get(id) === 'node-b')) ? performance.now() : undefined
    }, { timeoutMs: deadline(20_000), intervalMs: 100, what: 'every reaktor owned by node-a or node-b, as every node shows it' })
    figures.handedOverMs = Math.round(moved - publishedAt)
    t.pass(`every reaktor owned by node-a or node-b ${figures.handedOverMs as number} ms after the publish`)
    await waitFor(() => allRan(moved, IDS_2, '3.0.0'), { timeoutMs: deadline(20_000), what: 'every reaktor to run version 3' })
    t.same(new Set(since(moved, (r) => r.version === '3.0.0').map((r) => r.node)), new Set(['node-a', 'node-b']), 'version 3 runs on node-a and node-b')
    t.same(since(moved, (r) => r.node === 'node-c').map((r) => `${r.id} v${r.version}`), [], 'node-c started no run once it owned none')
    t.same(since(moved, (r) => r.version !== '3.0.0').map((r) => `${r.id}@${r.node} v${r.version}`), [], 'only version 3 runs')
    windows['version 3'] = [publishedAt, await observed(publishedAt, 'the window of version 3'), IDS_2]
  })

  await t.test('every node built again on the database with a new DATA_DIR runs the active version', async (t) => {
    await Promise.all(nodes.map(async (node) => await node.app.close()))
    const closedAt = performance.now()
    nodes = await startAll()
    const states = await waitFor(statesAre({ 'node-a': '3.0.0', 'node-b': '3.0.0', 'node-c': '3.0.0' }), { what: 'every node on 3.0.0' })
    t.same(states, { 'node-a': '3.0.0', 'node-b': '3.0.0', 'node-c': '3.0.0' }, 'every node runs 3.0.0, node-c without its error (its new DATA_DIR has no refusal)')
    for (const node of nodes) {
      t.same((await call(node, 'POST', '/aktor/pub-which', {})).body, { version: '3.0.0', node: node.id }, `${node.id} answers with version 3`)
      t.match(await fs.readdir(path.join(node.dataDir, 'apps')), [new RegExp(`^${APP}@3\\.0\\.0-[0-9a-f]{16}$`)], `${node.id} fetched the active version into its new DATA_DIR`)
    }
    await waitFor(() => allRan(closedAt, IDS_2, '3.0.0'), { timeoutMs: deadline(20_000), what: 'every reaktor to run after the restart' })
    await waitFor(() => NODES.every((n) => since(closedAt, (r) => r.node === n).length > 0), { timeoutMs: deadline(20_000), what: 'runs on every node after the restart' })
    t.same(since(closedAt, (r) => r.version !== '3.0.0').map((r) => `${r.id}@${r.node} v${r.version}`), [], 'only version 3 runs after the restart')
  })

  await t.test('the ledger: no overlapping runs, none aborted but by a shutdown, none late beyond the bound', async (t) => {
    await Promise.all(nodes.map(async (node) => await node.app.close()))
    figures.runs = ledger.length
    t.same(overlaps(ledger).slice(0, 10), [], `no two runs of one reaktor overlap (${ledger.length} runs)`)
    // The one exception: the id version 2 drops is stopped by the first node that switches, and a
    // node still on version 1 that owns it stops it as it stops any reaktor (docs/apps.md).
    const aborted = ledger.filter((r) => r.aborted !== undefined && !/shut/i.test(r.aborted) && !(r.id === DROPPED && r.version === '1.0.0' && /stopped/.test(r.aborted)))
    t.same(aborted.map((r) => `${r.id}@${r.node}: ${String(r.aborted)}`).slice(0, 10), [],
      'no run was aborted but by its node\'s shutdown, or the dropped id\'s stop')
    // A run is due one interval after the previous one ended. A switch keeps each runner and its
    // timer (the next run takes the new code); a handover (a node that cannot run the active
    // version, or the spread evening out after a switch) waits for the run in flight, and the
    // next holder continues from the stored next run: it takes the partition when told that it is
    // free, or at its next full pass, every reconcile interval (200 ms here). The margin is for the
    // handover's statements (flush, release, claim, read) and three nodes' timers in one process on
    // busy cores. It stops short of the failure it must tell apart: a released partition that no
    // node takes when told waits for the orphan grace (3 s from its release, which came right after
    // the run ended: an excess of at least 3000 - 250 ms).
    for (const [name, [from, to, ids]] of Object.entries(windows)) {
      const late = lateness(ledger, ids, from, to)
      figures[`worstExcess ${name}`] = late.slice(0, 3)
      t.ok(late[0].excessMs < allowedMs, `${name}: the worst excess over the ${INTERVAL_MS} ms interval is ${late[0].excessMs} ms (${late[0].id} ${late[0].at}), below ${allowedMs} ms`)
    }
  })

  t.comment(`measured: ${JSON.stringify(figures)}`)
})
