/**
 * The kept runs of bench/results/ as the report reads them, and their judged targets: those the
 * bench recorded (format 2), or, for a run made before, the current targets judged on its figures
 * where they can be, and marked not judged where it measured under an older definition.
 */
import fs from 'node:fs'
import path from 'node:path'
import { ROOT, num, sum, type Row } from '../lib.js'
import { TARGETS, SCENARIO, killJudgments, latencyJudgments, memoryJudgment, p99Judgment, ratioJudgment, refusalJudgment, shareJudgment, spreadJudgment, stallJudgment, atLeastJudgment, type Judgment } from '../targets.js'

export const RESULTS = 'bench/results'

/** A results JSON: `file` relative to the repository, with `/`. */
export interface Run {
  file: string
  json: RunJson
}

export interface RunJson {
  format?: number
  mode?: string
  commit?: string
  args?: string[]
  at?: string
  elapsedSeconds?: number
  machine?: { cpus: number, model: string, memoryGB: number, node: string, platform: string, pinned?: boolean }
  results?: Record<string, any>
  targets?: Judgment[]
  tables?: string[]
  params?: Record<string, number>
}

export interface RenderContext {
  /** The page the region is on, relative to the repository (`README.md`, `docs/performance.md`). */
  page: string
  /** The run the tables are of: the newest full run unless one was named. */
  run: Run
  /** Every kept JSON. */
  runs: readonly Run[]
}

/** Every JSON of bench/results/ (latest.json, a run's scratch copy outside git, left out). */
export function loadRuns (root = ROOT): Run[] {
  const dir = path.join(root, RESULTS)
  return fs.readdirSync(dir)
    .filter((f) => f.endsWith('.json') && f !== 'latest.json')
    .sort()
    .map((f) => ({ file: `${RESULTS}/${f}`, json: JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as RunJson }))
}

/** The pages that may hold regions, relative to the repository. */
export function pages (root = ROOT): string[] {
  return ['README.md', ...fs.readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)]
}

/** The run a report is of: the JSON named (a path from the repository or the working folder), or the newest full run. */
export function chosenRun (runs: readonly Run[], named?: string): Run {
  if (named === undefined) return newestFull(runs)
  const file = path.relative(ROOT, path.resolve(named)).split(path.sep).join('/')
  const run = runs.find((r) => r.file === file || r.file === named)
  if (run === undefined) throw new Error(`${named} is not a JSON of bench/results/`)
  return run
}

/** A full run of every scenario (no --only, no --quick). */
function isFull (run: Run): boolean {
  return run.json.mode === 'full' && run.json.results !== undefined && run.json.commit !== undefined && (run.json.args ?? []).length === 0
}

/** The full runs, oldest first. */
export function fullRuns (runs: readonly Run[]): Run[] {
  return runs.filter(isFull).sort((a, b) => String(a.json.at).localeCompare(String(b.json.at)))
}

function newestFull (runs: readonly Run[]): Run {
  const full = fullRuns(runs)
  if (full.length === 0) throw new Error(`no full run in ${RESULTS}/`)
  return full[full.length - 1]
}

/** A run made before the bench recorded its judgments (and before the targets of the current bench). */
export function isLegacy (run: Run): boolean {
  return (run.json.format ?? 1) < 2
}

/** The row of the HTTP table of `scenario` for `server` (the first server named so). */
export function httpRow (run: Run, scenario: string, server: string): Row | undefined {
  return (run.json.results?.http as Row[] | undefined)?.find((r) => r.scenario === scenario && String(r.server).startsWith(server))
}

/** Ours / the ceiling: the leading number of the "of ceiling" cell ("0.79x (0.76–0.84)"). */
function ratioOf (row: Row | undefined): number {
  return row === undefined ? NaN : Number.parseFloat(String(row['of ceiling']))
}

/** The judged targets of a run. */
export function judgmentsOf (run: Run): Judgment[] {
  return isLegacy(run) ? legacyJudgments(run) : run.json.targets ?? []
}

const OLD_CEILING = 'measured against a ceiling that serialised the status on every request, while the service sends cached bytes (the bench before the ceiling sent the same bytes)'
const NOT_COUNTED = 'stalls were not counted then (the bench before a reaktor that did not run again counted)'

/** The current targets on the figures of a run made before them. */
function legacyJudgments (run: Run): Judgment[] {
  const r = run.json.results ?? {}
  const out: Judgment[] = []
  const http = (scenario: string, bound: number): Judgment => {
    const row = httpRow(run, scenario, 'reaktor-service')
    return ratioJudgment(scenario, ratioOf(row), Number(row?.failed ?? NaN), bound)
  }
  if (r.http !== undefined) {
    out.push(http(SCENARIO.appScript, TARGETS.http.appScript), http(SCENARIO.appPage, TARGETS.http.appPage))
    out.push({ ...http(SCENARIO.status, TARGETS.http.status), met: null, note: OLD_CEILING })
  }
  const stallsNotCounted = (scenario: string): Judgment => ({ ...stallJudgment(scenario, 0), measured: 'not counted', met: null, note: NOT_COUNTED })
  if (r.s4 !== undefined) {
    out.push(shareJudgment(SCENARIO.s4, num(r.s4.share), TARGETS.s4.share), p99Judgment(SCENARIO.s4, '', num(r.s4.gapP99), TARGETS.s4.p99Ms, false), stallsNotCounted(SCENARIO.s4))
  }
  if (r.s5 !== undefined) out.push(atLeastJudgment(SCENARIO.s5, 'runs/s', num(r.s5.perSecond), TARGETS.s5.runsPerSecond, ''))
  if (r.s6 !== undefined) {
    out.push(...latencyJudgments(SCENARIO.s6same, r.s6.same as number[], TARGETS.s6.sameMedianMs, TARGETS.s6.sameMaxMs))
    out.push(...latencyJudgments(SCENARIO.s6cross, r.s6.cross as number[], TARGETS.s6.crossMedianMs, TARGETS.s6.crossMaxMs))
  }
  if (r.s7 !== undefined) out.push(...latencyJudgments(SCENARIO.s7, r.s7.failovers as number[], TARGETS.s7.medianMs, TARGETS.s7.maxMs))
  for (let i = 0; r[`s11_${i}`] !== undefined; i++) {
    const c = r[`s11_${i}`]
    const scenario = SCENARIO.s11case(String(c.label))
    out.push(shareJudgment(scenario, num(c.share), TARGETS.s11.share), p99Judgment(scenario, ' (worst node)', num(c.p99), num(c.p99Target), false), stallsNotCounted(scenario))
    out.push(refusalJudgment(scenario, Number(c.refusals)))
    if (Number(c.nodes) > 1) out.push(spreadJudgment(scenario, c.owned as number[], Number(c.reaktors)))
  }
  if (r.s11_memory !== undefined) out.push(memoryJudgment(num(r.s11_memory.rssPer)))
  for (let i = 0; r[`s11_kill_${i}`] !== undefined; i++) {
    const k = r[`s11_kill_${i}`]
    out.push(...killJudgments(SCENARIO.s11kill(i + 1), Number(k.orphans), Number(k.missing), Number(k.overlaps), Math.max(...(k.toFirstRun as number[]))))
  }
  return out
}

/** A number with `digits` decimals as the report writes it (1,234.5); a non-finite value as it is. */
export const dec = (v: number, digits = 1): string => Number.isFinite(v) ? v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : String(v)

/** A whole number as the report writes it (1,234); a non-finite value as it is. */
export const int = (v: number): string => Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : String(v)

/** Scenario 11 of a run's results as the report quotes it: its cases and kills, and their totals. */
export function scaleOf (r: Record<string, any>): { cases: any[], kills: any[], refusals: number, missing: number, overlaps: number, slowest: number } {
  const cases = [0, 1, 2].map((i) => r[`s11_${i}`]).filter((c) => c !== undefined)
  const kills = [0, 1, 2, 3, 4].map((i) => r[`s11_kill_${i}`]).filter((k) => k !== undefined)
  return {
    cases,
    kills,
    refusals: sum(cases, (c) => Number(c.refusals)),
    missing: sum(kills, (k) => Number(k.missing)),
    overlaps: sum(kills, (k) => Number(k.overlaps)),
    slowest: Math.max(...kills.flatMap((k) => k.toFirstRun as number[]))
  }
}
