/**
 * The targets of `npm run bench`, in one place: the bench judges its run against them (a missed
 * one makes it exit 1), and `npm run bench:report` prints them beside the figures, judging the JSON
 * of a run made before a target changed as far as that run's figures allow.
 */
import { formatTable, median } from './lib.js'

/** One target of one scenario, judged. */
export interface Judgment {
  /** The scenario as its table names it ("1 app-UI JS 27 KB", "6 same node", "11 20,000 at 3s, 1 node"). */
  scenario: string
  what: string
  target: string
  measured: string
  /** null: not judged, the run measured it under an older definition (`note` says which). */
  met: boolean | null
  note?: string
}

export const TARGETS = {
  /** ours / the bare Fastify route sending the same bytes, ratio of the means, no failed request. */
  http: { appScript: 0.7, appPage: 0.6, status: 0.8 },
  /** Share of the expected runs; gap − interval p99, a reaktor that did not run again counting as infinite. */
  s4: { share: 0.95, p99Ms: 100 },
  /** The design's back-to-back rate: one reaktor returning true costs a few µs per run. */
  s5: { runsPerSecond: 50_000 },
  /** Start → first run: median and max, on the owner and through another node. */
  s6: { sameMedianMs: 10, sameMaxMs: 50, crossMedianMs: 100, crossMaxMs: 250 },
  /** kill -9 of the owner → first run elsewhere: the next reconcile pass (≤ 1 s), the fencing grace, and room. */
  s7: { medianMs: 2000, maxMs: 3000 },
  /** Scale: the p99 bound is the case's own (scenarios/scale.ts). */
  s11: { share: 0.95, evenWithin: 0.1, rssPer10kMB: 200, killToFirstRunMaxMs: 3000 },
  /**
   * Publishing: publish → every node serves the version's UI and runs its code (max); reaktors
   * running through activations (share, p99 as 11's 3-node cases, no overlap); what an activation
   * of a version not loaded before leaves in a node's memory (Node cannot unload a module).
   */
  s12: { publishMaxMs: 5000, share: 0.99, p99Ms: 250, rssPerActivationMiB: 5 }
} as const

/** The scenario of a judgment, as the bench and the report both name it. */
export const SCENARIO = {
  appScript: '1 app-UI JS 27 KB',
  appPage: '2 app-UI HTML + helper',
  status: '3 GET status',
  s4: '4 10,000 at 3s, 1 node',
  s5: '5 back to back',
  s6same: '6 same node',
  s6cross: '6 cross node',
  s7: '7 failover',
  s11case: (label: string): string => `11 ${label}`,
  s11memory: '11 memory',
  s11kill: (n: number): string => `11 kill -9 ${n}`,
  s12publish: '12 publish 1 MiB',
  s12switch: (label: string): string => `12 ${label}`,
  s12memory: '12 memory per activation'
} as const

const int = (v: number): string => Math.round(v).toLocaleString('en-US')
const ms = (v: number): string => Number.isFinite(v) ? `${(Math.round(v * 10) / 10).toLocaleString('en-US')} ms` : v > 0 ? '∞ (a reaktor did not run again)' : 'none'
const pct = (v: number): string => `${Math.round(v * 1000) / 10} %`
// Three decimals: a ratio just under its bound must not read as equal to it.
const ratio = (v: number): string => `${Math.round(v * 1000) / 1000}x`

export function metCell (judgments: readonly Judgment[]): string {
  if (judgments.some((j) => j.met === false)) return 'NO'
  if (judgments.some((j) => j.met === null)) return 'not judged'
  return judgments.length === 0 ? '' : 'yes'
}

export function ratioJudgment (scenario: string, value: number, failed: number, bound: number): Judgment {
  return {
    scenario,
    what: 'of the ceiling (ratio of the means), no failed request',
    target: `≥ ${bound}x`,
    measured: `${ratio(value)}, ${int(failed)} failed`,
    met: value >= bound && failed === 0
  }
}

export function shareJudgment (scenario: string, share: number, bound: number): Judgment {
  const met = share >= bound
  // A miss must not read as the bound itself: then two decimals, rounded down.
  const measured = !met && pct(share) === pct(bound) ? `${Math.floor(share * 10_000) / 100} %` : pct(share)
  return { scenario, what: 'share of the expected runs', target: `≥ ${pct(bound)}`, measured, met }
}

/**
 * The p99 of gap − interval. `stallsCounted` false: a run that counted only the reaktors that ran
 * again, whose p99 is a lower bound of today's: above the bound it is a miss, below it says nothing.
 */
export function p99Judgment (scenario: string, what: string, p99: number, boundMs: number, stallsCounted = true): Judgment {
  const j: Judgment = { scenario, what: `gap − interval p99${what}`, target: `≤ ${int(boundMs)} ms`, measured: ms(p99), met: p99 <= boundMs }
  if (stallsCounted || !j.met) return j
  return { ...j, met: null, note: 'measured over the reaktors that ran again (the bench before stalls counted)' }
}

/** Reaktors that did not run again in the window (or that no node owned at its end). */
export function stallJudgment (scenario: string, stalled: number): Judgment {
  return { scenario, what: 'reaktors that did not run again', target: '0', measured: int(stalled), met: stalled === 0 }
}

export function refusalJudgment (scenario: string, refusals: number): Judgment {
  return { scenario, what: 'lock refusals', target: '0', measured: String(refusals), met: refusals === 0 }
}

/** Every node owns within `TARGETS.s11.evenWithin` of an even share of `total`. */
export function evenlySpread (owned: readonly number[], total: number): boolean {
  const even = total / owned.length
  return owned.every((o) => Math.abs(o - even) <= TARGETS.s11.evenWithin * even)
}

export function spreadJudgment (scenario: string, owned: readonly number[], total: number): Judgment {
  return { scenario, what: 'reaktors per node', target: `within ${TARGETS.s11.evenWithin * 100} % of an even share`, measured: owned.join(' / '), met: evenlySpread(owned, total) }
}

export function atLeastJudgment (scenario: string, what: string, value: number, bound: number, unit: string): Judgment {
  return { scenario, what, target: `≥ ${int(bound)}${unit}`, measured: `${int(value)}${unit}`, met: value >= bound }
}

export function atMostJudgment (scenario: string, what: string, value: number, bound: number, unit: string): Judgment {
  return { scenario, what, target: `≤ ${int(bound)}${unit}`, measured: `${int(value)}${unit}`, met: value <= bound }
}

/** Median and max of latency samples (ms), each against its bound. */
export function latencyJudgments (scenario: string, samples: readonly number[], medianMs: number, maxMs: number): Judgment[] {
  const mid = median(samples)
  const max = samples.length === 0 ? NaN : Math.max(...samples)
  return [
    { scenario, what: `median of ${samples.length}`, target: `≤ ${int(medianMs)} ms`, measured: ms(mid), met: mid <= medianMs },
    { scenario, what: `max of ${samples.length}`, target: `≤ ${int(maxMs)} ms`, measured: ms(max), met: max <= maxMs }
  ]
}

/** The memory of a node with 20,000 reaktors, per 10,000 (its whole RSS divided). */
export function memoryJudgment (rssPer10kMB: number): Judgment {
  const bound = TARGETS.s11.rssPer10kMB
  return { scenario: SCENARIO.s11memory, what: 'RSS per 10,000 reaktors (a node with 20,000: its RSS / 2)', target: `< ${bound} MB`, measured: `${Math.round(rssPer10kMB)} MB`, met: rssPer10kMB < bound }
}

/** The scale kill -9 case: every orphan ran again, no overlap, the slowest first run in bound. */
export function killJudgments (scenario: string, orphans: number, missing: number, overlaps: number, toFirstRunMaxMs: number): Judgment[] {
  return [
    { scenario, what: 'orphans that ran again on a survivor', target: `all ${int(orphans)}`, measured: int(orphans - missing), met: missing === 0 },
    overlapJudgment(scenario, overlaps),
    atMostJudgment(scenario, 'kill → first run on a survivor, max', toFirstRunMaxMs, TARGETS.s11.killToFirstRunMaxMs, ' ms')
  ]
}

/** Runs of one reaktor that overlapped, over every run of every node that the ledger recorded. */
export function overlapJudgment (scenario: string, overlaps: number): Judgment {
  return { scenario, what: 'overlapping runs of one reaktor', target: '0', measured: int(overlaps), met: overlaps === 0 }
}

/** A node's RSS growth per activation of a version it had not loaded, the worst node's (MiB, after a forced GC when `gc`). */
export function activationMemoryJudgment (perActivationMiB: number, activations: number, gc: boolean): Judgment {
  const bound = TARGETS.s12.rssPerActivationMiB
  return {
    scenario: SCENARIO.s12memory,
    what: `RSS growth per activation of a version not loaded before (worst node, over ${activations}${gc ? ', after a forced GC' : ', no forced GC'})`,
    target: `≤ ${bound} MiB`,
    measured: `${(Math.round(perActivationMiB * 100) / 100).toLocaleString('en-US')} MiB`,
    met: perActivationMiB <= bound
  }
}

/** The verdict a run ends with: the missed targets (each on its own row), or that every one was met. */
export function verdictText (judged: readonly Judgment[]): string {
  const missed = judged.filter((j) => j.met === false)
  if (missed.length === 0) return `every target met (${judged.length})`
  return formatTable(`MISSED: ${missed.length} of ${judged.length} targets`, missed.map((j) => ({ scenario: j.scenario, what: j.what, target: j.target, measured: j.measured }))).trimEnd()
}
