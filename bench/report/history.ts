/**
 * The `history` region: what the run history costs, from the kept rounds of scenario 4 with
 * RUN_HISTORY_PER_REAKTOR 100 and 0 alternating (bench/results/*-s4-history.json).
 */
import path from 'node:path'
import { num } from '../lib.js'
import { TARGETS } from '../targets.js'
import type { RenderContext } from './runs.js'

interface Round {
  round: number
  runHistoryPerReaktor: number
  machine?: { cpus: number, model: string }
  s4: { share: number, gapP99: number, runs: number, cpuMs: number, load: { rowsPerSecond: number, walBytes: number } }
}

interface HistoryJson { commit: string, command: string, rounds: Round[] }

export function renderHistory (ctx: RenderContext): string {
  const kept = ctx.runs.find((r) => r.file.endsWith('-s4-history.json'))
  if (kept === undefined) throw new Error('no *-s4-history.json in bench/results/')
  const json = kept.json as unknown as HistoryJson
  const on = json.rounds.filter((r) => r.runHistoryPerReaktor > 0)
  const off = json.rounds.filter((r) => r.runHistoryPerReaktor === 0)
  const range = (rounds: Round[], pick: (r: Round) => number, digits: number): string => {
    const values = rounds.map(pick)
    const fmt = (v: number): string => v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
    return `${fmt(Math.min(...values))}–${fmt(Math.max(...values))}`
  }
  const mean = (rounds: Round[], pick: (r: Round) => number): number => rounds.reduce((a, r) => a + pick(r), 0) / rounds.length
  const wal = (r: Round): number => r.s4.load.walBytes / r.s4.runs
  const rows = (r: Round): number => r.s4.load.rowsPerSecond
  const cpu = (r: Round): number => r.s4.cpuMs * 1000 / r.s4.runs
  const share = (r: Round): number => num(r.s4.share) * 100
  const p99 = (r: Round): number => num(r.s4.gapP99)
  // Round by round: each history-on round against the history-off round that followed it.
  const cpuCost = on.map((r) => cpu(r) - cpu(off.find((o) => o.round === r.round) ?? r))
  const held = json.rounds.every((r) => num(r.s4.share) >= TARGETS.s4.share && p99(r) <= TARGETS.s4.p99Ms)
  const m = json.rounds[0]?.machine
  const rel = path.posix.relative(path.posix.dirname(ctx.page), kept.file)
  return [
    `Scenario 4 with the run history on (\`RUN_HISTORY_PER_REAKTOR\`, 100 by default) and off, on commit \`${json.commit}\`: \`npm run bench -- --only=4 --history=N\`, N = 100 and 0 alternating, ${on.length} rounds each, on a quiet machine${m === undefined ? '' : ` (${m.cpus} × ${m.model})`}; every reaktor starts with 100 rows so that the pruning runs as in a steady state. JSON: [\`${kept.file}\`](${rel}).`,
    '',
    '| per run, 10,000 reaktors at 3 s, one node | history on (100) | history off (0) |',
    '|---|---|---|',
    `| runs made (share of expected) | ${range(on, share, 1)} % | ${range(off, share, 1)} % |`,
    `| gap−interval p99 (over the reaktors that ran again, as the bench then measured it) | ${range(on, p99, 1)} ms | ${range(off, p99, 1)} ms |`,
    '| statements | the results\' one per flush (rows go in it) + about one pruning statement a second | one per flush |',
    `| rows written per second (inserted + deleted + updated) | ${range(on, rows, 0)} (each run's row inserted, later deleted) | ${range(off, rows, 0)} |`,
    `| WAL bytes per run | ${range(on, wal, 0)} | ${range(off, wal, 0)} |`,
    `| node CPU per run | ${range(on, cpu, 1)} µs | ${range(off, cpu, 1)} µs |`,
    '',
    `So history costs the database about ${(mean(on, wal) / mean(off, wal)).toFixed(1)} times the WAL and ${(mean(on, rows) / mean(off, rows)).toFixed(1)} times the rows of the results alone, and the node ${Math.min(...cpuCost).toFixed(1)}–${Math.max(...cpuCost).toFixed(1)} µs per run (round by round); the share and p99 targets of scenario 4 (≥ ${TARGETS.s4.share * 100} % of runs, p99 ≤ ${TARGETS.s4.p99Ms} ms, the p99 as then measured) ${held ? 'held in every round' : 'did not hold in every round'}.`
  ].join('\n')
}
