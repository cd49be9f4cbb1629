/**
 * Scenario 11: ownership at scale (partitions): 20,000 to 100,000 reaktors on 1 or 3 nodes, the
 * memory of a node per 10,000 reaktors, and kill -9 of one of 3 nodes with every run recorded.
 */
import fs from 'node:fs/promises'
import { createDatabase, judge, nodeOptions, note, P, print, results, startNode, until } from '../context.js'
import { countOverlaps, delay, mean, median, num, round, runsByReaktor, sum, wallNow, type ChildHandle, type LedgerRun, type Message, type Row } from '../lib.js'
import type { NodeOptions } from '../node.js'
import { evenlySpread, killJudgments, memoryJudgment, p99Judgment, refusalJudgment, SCENARIO, shareJudgment, spreadJudgment, stallJudgment, TARGETS, type Judgment } from '../targets.js'

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
  const reports = await Promise.all(nodes.map(async (n) => await n.request({ type: 'report', lateMs: c.p99Target })))
  const cpu1 = await busyCoreSeconds()
  await Promise.all(nodes.map(async (n) => await n.shutdown()))
  const windowMs = mean(reports.map((r, i) => Number(r.at) - Number(begins[i].at)))
  const expected = c.reaktors * windowMs / c.intervalMs
  const cycles = sum(reports, (r) => Number(r.cycles))
  const runs = sum(reports, (r) => Number(r.runs))
  const share = cycles / expected
  const p99 = Math.max(...reports.map((r) => num(r.gapP99)))
  const owned = reports.map((r) => Number(r.owned))
  // Each node counts what it owned throughout the window and did not run; what no node owns runs nowhere.
  const stalled = sum(reports, (r) => Number(r.stalled)) + Math.max(0, c.reaktors - sum(owned))
  const flushed = sum(reports, (r) => (r.flushedInWindow as { rows: number }).rows)
  const statements = sum(reports, (r) => (r.flushedInWindow as { flushes: number }).flushes)
  const refusals = sum(reports, (r) => Number(r.lockRefusals))
  const cpuPerRunUs = (cpu1 - cpu0) * 1e6 / Math.max(1, runs)
  const nodeCpuPerRunUs = sum(reports, (r) => Number(r.cpuMs)) * 1000 / Math.max(1, runs)
  const rss = reports.map((r) => Number(r.rss) / 2 ** 20)
  const scenario = SCENARIO.s11case(c.label)
  const judgments: Judgment[] = [
    shareJudgment(scenario, share, TARGETS.s11.share),
    p99Judgment(scenario, ' (worst node)', p99, c.p99Target),
    stallJudgment(scenario, stalled),
    refusalJudgment(scenario, refusals)
  ]
  if (c.nodes > 1) judgments.push(spreadJudgment(scenario, owned, c.reaktors))
  const row: Row = {
    case: c.label,
    'window s': round(windowMs / 1000, 1),
    'expected runs': Math.round(expected),
    'runs, phase-corrected': Math.round(cycles),
    share: `${round(share * 100, 1)} %`,
    'did not run again': stalled,
    'gap−interval p99 ms (worst node)': round(p99, 1),
    'owned per node': owned.join(' / '),
    'results flushed (statements)': `${flushed} (${statements})`,
    'lock refusals': refusals,
    'CPU µs/run, all processes': Math.round(cpuPerRunUs),
    'CPU µs/run, nodes': Math.round(nodeCpuPerRunUs),
    'RSS MB per node': rss.map((r) => Math.round(r)).join(' / '),
    'spread after s': round(spreadMs / 1000, 1),
    met: judge(...judgments)
  }
  results[`s11_${index}`] = { ...c, windowMs, expected, cycles, runs, share, p99, stalled, owned, flushed, statements, refusals, cpuPerRunUs, nodeCpuPerRunUs, rss, spreadMs, reports }
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
  // The victim's runs: recorded ones, and those in flight at the kill (they end with the process).
  const victimRuns: LedgerRun[] = [...(before.runs as LedgerRun[]), ...(before.inFlight as Array<[number, number]>).map(([i, start]): LedgerRun => [i, start, killedAt])]
  const orphans = before.owned as number[]
  const byReaktor = runsByReaktor([...victimRuns, ...after.flatMap((a) => a.runs as LedgerRun[])])
  const overlaps = countOverlaps(byReaktor)
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
  const ledgerRuns = victimRuns.length + sum(after, (x) => (x.runs as LedgerRun[]).length)
  results[`s11_kill_${index}`] = { orphans: orphans.length, missing, overlaps, toFirstRun, lateness, runs: ledgerRuns }
  return {
    kill: index + 1,
    orphans: orphans.length,
    'ran again': orphans.length - missing,
    'to first run p50 ms': Math.round(median(toFirstRun)),
    'to first run max ms': Math.round(Math.max(...toFirstRun)),
    'after due p50 ms': Math.round(median(lateness)),
    'after due max ms': Math.round(Math.max(...lateness)),
    'caught up early': lateness.filter((l) => l < -50).length,
    'ledger runs': ledgerRuns,
    overlaps,
    met: judge(...killJudgments(SCENARIO.s11kill(index + 1), orphans.length, missing, overlaps, Math.max(...toFirstRun)))
  }
}

/** The same node process without reaktors beside the first case's node: what the service itself takes. */
async function memory (tmp: string, r0: { rss: number[], reaktors: number, reports: Message[] }): Promise<void> {
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
  const bound = TARGETS.s11.rssPer10kMB
  print('Scenario 11: memory of one node with 20,000 reaktors at 3s (RSS at the end of the window; live heap after a forced full GC)', [
    { node: '20,000 reaktors', 'RSS MB': round(r0.rss[0], 0), 'live heap MB': round(mb(r0.reports[0].liveHeap), 0) },
    { node: 'no reaktors (same process, same service)', 'RSS MB': round(mb(base.rss), 0), 'live heap MB': round(mb(base.liveHeap), 0) },
    { node: 'per 10,000 reaktors: RSS / 2', 'RSS MB': round(rssPer, 0), 'live heap MB': '', target: `< ${bound}`, met: judge(memoryJudgment(rssPer)) },
    { node: 'per 10,000 reaktors: above the idle node', 'RSS MB': round(marginal, 0), 'live heap MB': round(heapPer, 1), target: '', met: '' }
  ])
  results.s11_memory = { base, rssPer, marginal, heapPer }
}

export async function scenario11 (tmp: string): Promise<void> {
  const rows: Row[] = []
  for (const i of P.s11Cases) rows.push(await scaleCase(tmp, SCALE_CASES[i], i))
  print('Scenario 11: ownership at scale (partitions), no-op aktor, every run result persisted in batches, targets: ≥ 95 % of expected runs, p99 gap excess ≤ 100 ms (1 node) / 250 ms (3 nodes) with a reaktor that did not run again counting as infinite, none stalled, nodes within 10 % of an even share, no lock error', rows)
  const r0 = results.s11_0 as { rss: number[], reaktors: number, reports: Message[] } | undefined
  if (r0 !== undefined) await memory(tmp, r0)
  const kills: Row[] = []
  for (let k = 0; k < P.s11Kills; k++) kills.push(await scaleKill(tmp, k))
  print('Scenario 11: kill -9 of one of 3 nodes, 9,000 reaktors at 3s with 20 ms runs; "after due": first run on a survivor minus max(kill, when it was due; negative: a catch-up run, the victim\'s last results were not flushed yet); target: every orphan runs again, no overlap, to first run ≤ 3,000 ms', kills)
}
