import type { Registry } from 'prom-client'
import { bucketOf, pushHistogram, type Sample } from './histogram.js'

/** The `outcome` label values, in the order of the per-reaktor slots. */
const OUTCOMES = ['more_work', 'no_work', 'failed'] as const
export type PollingRunOutcome = typeof OUTCOMES[number]

/** Upper bounds (seconds) of the run-duration histogram. */
const BUCKETS = [0.001, 0.01, 0.1, 1, 10, 60, 300]

/*
 * Per reaktor, one Float64Array: [runs by outcome (3), bucket counts (7), count, sum].
 * prom-client keeps an object per label set (a labels object, a bucket map, a key string): about
 * 4 KB per reaktor for this counter and histogram, 400 MB at 100,000 reaktors. This is 12 numbers.
 */
const RUNS = 0
const BUCKET = OUTCOMES.length
const COUNT = BUCKET + BUCKETS.length
const SUM = COUNT + 1
const SLOTS = SUM + 1

/**
 * `reaktor_polling_runs_total{reaktor,outcome}` and `reaktor_polling_run_duration_seconds{reaktor}`
 * of the runs on this node, kept compactly and rendered at scrape time (prom-client's custom
 * metric interface: an object with `name`, `help`, `type` and `get()`).
 */
export class PollingRunMetrics {
  private readonly byReaktor = new Map<string, Float64Array>()

  record (reaktorId: string, outcome: PollingRunOutcome, seconds: number): void {
    let slots = this.byReaktor.get(reaktorId)
    if (slots === undefined) {
      slots = new Float64Array(SLOTS)
      this.byReaktor.set(reaktorId, slots)
    }
    slots[RUNS + OUTCOMES.indexOf(outcome)]++
    const b = bucketOf(BUCKETS, seconds)
    if (b < BUCKETS.length) slots[BUCKET + b]++
    slots[COUNT]++
    slots[SUM] += seconds
  }

  register (registry: Registry): void {
    const byReaktor = this.byReaktor
    const metric = (name: string, help: string, type: 'counter' | 'histogram', values: () => Sample[]): void => {
      const m = { name, help, type, get: async () => ({ name, help, type, values: values(), aggregator: 'sum' }), reset: () => byReaktor.clear() }
      registry.registerMetric(m as unknown as Parameters<Registry['registerMetric']>[0])
    }
    metric('reaktor_polling_runs_total', 'Finished polling reaktor runs on this node, by outcome (more_work, no_work, failed)', 'counter', () => {
      const out: Sample[] = []
      for (const [reaktor, slots] of byReaktor) {
        for (let o = 0; o < OUTCOMES.length; o++) if (slots[RUNS + o] > 0) out.push({ value: slots[RUNS + o], labels: { reaktor, outcome: OUTCOMES[o] } })
      }
      return out
    })
    const name = 'reaktor_polling_run_duration_seconds'
    metric(name, 'Duration of polling reaktor runs on this node', 'histogram', () => {
      const out: Sample[] = []
      for (const [reaktor, slots] of byReaktor) {
        pushHistogram(out, name, BUCKETS, slots, BUCKET, { count: slots[COUNT], sum: slots[SUM] }, (le): Pick<Sample, 'labels'> => ({ labels: le === undefined ? { reaktor } : { reaktor, le } }))
      }
      return out
    })
  }
}
