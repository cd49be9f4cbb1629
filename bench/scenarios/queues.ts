/**
 * Scenario 10: scenarios 4 and 5 on graphile-worker and pg-boss (bench/peers.ts: settings, job
 * shape, and why), each in its own process and database of the same PostgreSQL. Every side prints
 * what one run costs the database beside its ratio: the service keeps its loop in memory and
 * writes results in batches, a job queue makes every run a durable job.
 */
import { cleanups, createDatabase, INTERVAL_MS, note, P, print, results } from '../context.js'
import { forkChild, round, sig, type Row } from '../lib.js'
import { measureRuns, perRun, type Throughput } from '../measure.js'
import { describeGraphile, describePgBoss, GRAPHILE, installedVersion, PGBOSS, type GraphileSettings, type PgBossSettings } from '../peers.js'
import { TARGETS } from '../targets.js'

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
  if (Number.isNaN(value)) return 'none: no reaktor ran twice'
  return value === Infinity ? '∞: reaktors did not run again' : round(value, 1)
}

/** How a peer of scenario 10 is run: what the note says, and what measureRuns is given. */
interface PeerRun { what: string, reaktors: number, intervalMs: number, behaviour: 'interval' | 'drain', windowMs: number, settleMs: number, lateMs: number }

async function measurePeer (peer: Peer, key: string, run: PeerRun): Promise<Throughput | Error> {
  const url = await createDatabase(`bench_${key}`)
  const { reaktors, intervalMs, behaviour } = run
  const child = forkChild(key, peer.script, [JSON.stringify({ databaseUrl: url, reaktors, intervalMs, behaviour, settings: peer.settings })])
  cleanups.push(async () => await child.shutdown())
  return await measureRuns(child, reaktors, run.windowMs, run.settleMs, run.lateMs, url).catch(async (err: Error) => {
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

export async function scenario10 (ours: { s4?: Throughput, s5?: Throughput }): Promise<void> {
  const settings = `graphile-worker ${PEERS[0].version}: ${describeGraphile(GRAPHILE)}; pg-boss ${PEERS[1].version}: ${describePgBoss(PGBOSS)}`
  const perRunNote = 'per run: transactions and rows written in that side\'s own database, WAL of the server, over the window'
  results.s10 = { versions: Object.fromEntries(PEERS.map((p) => [p.name, p.version])), graphile: GRAPHILE, pgboss: PGBOSS }
  if (ours.s4 !== undefined) {
    const o = ours.s4
    const share = (r: Throughput): number => r.cycles / (P.s4Reaktors * r.windowMs / INTERVAL_MS)
    const lower = (t: Throughput): string => Number.isFinite(t.gapP99) && Number.isFinite(o.gapP99) ? `${sig(t.gapP99 / o.gapP99)}x lower` : 'n/a'
    const rows = await peerTable(4, o, {
      what: `${P.s4Reaktors} self-rescheduling jobs at 3s`, reaktors: P.s4Reaktors, intervalMs: INTERVAL_MS, behaviour: 'interval', windowMs: P.s4WindowMs, settleMs: P.s4SettleMs, lateMs: TARGETS.s4.p99Ms
    }, (r) => ({
      'share of expected runs': `${round(share(r) * 100, 1)} %`,
      'did not run again': r.stalled,
      'gap−interval p50 ms': gap(r.gapP50),
      'gap−interval p99 ms': gap(r.gapP99),
      'every reaktor ran once after': r.allRanOnce ? `${round(r.startMs / 1000, 1)} s` : `not within ${P.catchUpMs / 1000} s`,
      'RSS MB': round(r.rss / 2 ** 20, 0),
      ...costColumns(r)
    }), (t) => `share ${round(share(o) / share(t), 2)}x; p99 gap ${lower(t)}`)
    print(`Scenario 10: scenario 4 (${P.s4Reaktors.toLocaleString('en-US')} reaktors at 3s, no-op) on job queues, each in its own process and database of the same PostgreSQL; ${settings}; ${perRunNote}`, rows)
  }
  if (ours.s5 !== undefined) {
    const o = ours.s5
    const perSecond = (r: Throughput): number => r.runs / (r.windowMs / 1000)
    const rows = await peerTable(5, o, { what: 'one job re-adding itself', reaktors: 1, intervalMs: 0, behaviour: 'drain', windowMs: P.s5WindowMs, settleMs: 1000, lateMs: 0 }, (r) => ({
      'runs/s back to back': Math.round(perSecond(r)),
      'RSS MB': round(r.rss / 2 ** 20, 0),
      ...costColumns(r)
    }), (t) => `runs/s ${round(perSecond(o) / perSecond(t), 1)}x`)
    print(`Scenario 10: scenario 5 (one reaktor returning true, back to back) on job queues, as above; ${settings}; ${perRunNote}`, rows)
  }
}
