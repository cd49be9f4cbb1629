/**
 * A measured window of the scheduler scenarios (4, 5, and 10's job queues): runs, gaps, stalls,
 * memory and CPU as the process that ran the reaktors counted them, and what the database did
 * meanwhile (its own counters: transactions, rows written, WAL).
 */
import pg from 'pg'
import { P, until } from './context.js'
import { delay, num, type ChildHandle } from './lib.js'

/** What the database did in a window: transactions and rows written in it, per second and in all, and its WAL. */
export interface DatabaseLoad { transactions: number, rows: number, transactionsPerSecond: number, rowsPerSecond: number, walBytes: number }

/**
 * A measured window. `stalled`: reaktors that did not run again (infinite gaps, already in the gap
 * statistics), plus, for a service node, those it did not own at the end (no other node runs them).
 * `flushes`/`flushedRows`: the service's batched writes of run results in the window (statements,
 * rows), absent for the peers, which have none.
 */
export interface Throughput { runs: number, cycles: number, allRanOnce: boolean, windowMs: number, gapCount: number, stalled: number, gapP50: number, gapP99: number, gapMax: number, rss: number, startMs: number, cpuMs: number, load?: DatabaseLoad, flushes?: number, flushedRows?: number }

/** What one run cost the database on average in the window (undefined without counters or runs). */
export function perRun (r: Throughput): { transactions: number, rows: number, walBytes: number } | undefined {
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

/**
 * Starts a node (ours, or a peer's of scenario 10), waits for every reaktor's first run (at most
 * `catchUpMs`: one that never catches up is measured as it is) and a steady state, then measures
 * a window; with `databaseUrl`, also what the database did in it (that database's transactions and
 * rows written; WAL of the whole server, on which nothing else runs meanwhile). `lateMs`: how late
 * past its interval a reaktor that has not run again by the window's end may be before it counts
 * as stalled.
 */
export async function measureRuns (child: ChildHandle, reaktors: number, windowMs: number, settleMs: number, lateMs: number, databaseUrl?: string): Promise<Throughput> {
  const t0 = Date.now()
  await child.ready
  const allRanOnce = await until(`all ${reaktors} reaktors to run once`, P.catchUpMs, async () => Number((await child.request({ type: 'stats' })).everRan) >= reaktors)
    .then(() => true, () => false)
  const startMs = Date.now() - t0
  await delay(settleMs)
  const before = databaseUrl === undefined ? undefined : await databaseCounters(databaseUrl)
  const begin = await child.request({ type: 'begin' })
  await delay(windowMs)
  const report = await child.request({ type: 'report', lateMs })
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
  // Only a service node reports what it owns; alone, it should own every reaktor.
  const unowned = report.owned === undefined ? 0 : Math.max(0, reaktors - Number(report.owned))
  return {
    load,
    flushes: flushed?.flushes,
    flushedRows: flushed?.rows,
    runs: Number(report.runs),
    cycles: Number(report.cycles),
    allRanOnce,
    windowMs: Number(report.at) - Number(begin.at),
    // Without gaps (no reaktor ran twice in the window) the statistics are NaN.
    gapCount: Number(report.gapCount),
    stalled: Number(report.stalled) + unowned,
    gapP50: num(report.gapP50),
    gapP99: num(report.gapP99),
    gapMax: num(report.gapMax),
    rss: Number(report.rss),
    cpuMs: Number(report.cpuMs),
    startMs
  }
}
