/**
 * The bench's run window (bench/lib.ts): a reaktor that does not run again counts as an infinite
 * gap, so a stall fails scenario 4's and 11's p99 target instead of leaving the statistics.
 */
import t from 'tap'
import { performance } from 'node:perf_hooks'
import { keepNonFinite, num, RunWindow } from '../../bench/lib.js'
import { deadline, waitFor } from '../helpers/timing.js'

const INTERVAL_MS = 50

/** Returns once more than `ms` have passed since `from` (performance.now()). */
async function past (from: number, ms: number): Promise<void> {
  await waitFor(() => performance.now() - from > ms, { timeoutMs: deadline(5000), intervalMs: 1, what: `${ms} ms to pass` })
}

t.test('a reaktor that did not run again in the window is an infinite gap', async (t) => {
  const window = new RunWindow(3, INTERVAL_MS)
  for (const i of [0, 1, 2]) window.intervalRun(i)
  const ranAt = performance.now()
  window.begin()
  await past(ranAt, 3 * INTERVAL_MS)
  // 0 and 1 run again just before the end; 2 last ran more than an interval and the allowed lateness ago.
  window.intervalRun(0)
  window.intervalRun(1)
  const end = window.end(INTERVAL_MS)
  t.equal(end.stalled, 1, 'reaktor 2 did not run again')
  t.equal(end.gapCount, 2, 'the two that ran again have a gap each')
  t.equal(end.gapMax, Infinity)
  t.equal(end.gapP99, Infinity, 'one of three gaps is past the 99th percentile')
  t.ok(Number.isFinite(end.gapP50))
})

t.test('a reaktor that ran in the window and then stopped is an infinite gap too', async (t) => {
  const window = new RunWindow(1, INTERVAL_MS)
  window.intervalRun(0)
  const ranAt = performance.now()
  window.begin()
  await past(ranAt, INTERVAL_MS)
  window.intervalRun(0)
  const lastRunAt = performance.now()
  await past(lastRunAt, 2 * INTERVAL_MS)
  const end = window.end(0)
  t.equal(end.runs, 1, 'it ran once in the window')
  t.equal(end.stalled, 1, 'and not again')
  t.equal(end.gapMax, Infinity)
})

t.test('only the reaktors considered, and only once they are overdue, count', async (t) => {
  const window = new RunWindow(2, INTERVAL_MS)
  window.intervalRun(0)
  window.intervalRun(1)
  const ranAt = performance.now()
  window.begin()
  await past(ranAt, INTERVAL_MS)
  window.intervalRun(0)
  t.equal(window.end(10_000).stalled, 0, 'reaktor 1 is not later than the interval and the allowed lateness')
  window.begin()
  await past(ranAt, 2 * INTERVAL_MS)
  window.intervalRun(0)
  const lastRunAt = performance.now()
  t.equal(window.end(0, (i) => i !== 1).stalled, 0, 'reaktor 1 is not this process\'s to run')
  window.begin()
  await past(lastRunAt, INTERVAL_MS)
  t.equal(window.end(0).stalled, 2, 'with no run in the window, both are overdue')
})

t.test('a reaktor that never ran is overdue; without an interval nothing stalls', async (t) => {
  t.equal(new RunWindow(4, INTERVAL_MS).end(0).stalled, 4)
  const drain = new RunWindow(1, 0)
  drain.begin()
  t.equal(drain.end(0).stalled, 0)
  t.ok(Number.isNaN(drain.end(0).gapMax), 'no gaps: NaN, not an infinite gap')
})

t.test('an infinite gap survives JSON, and null still means no value', async (t) => {
  const sent = JSON.parse(JSON.stringify({ p99: Infinity, p50: NaN, max: 3.5 }, keepNonFinite)) as Record<string, unknown>
  t.equal(num(sent.p99), Infinity)
  t.ok(Number.isNaN(num(sent.p50)))
  t.equal(num(sent.max), 3.5)
  t.ok(Number.isNaN(num(null)))
})
