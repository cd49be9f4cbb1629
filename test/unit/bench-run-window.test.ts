/**
 * The bench's run window (bench/lib.ts): a reaktor that does not run again counts as an infinite
 * gap, so a stall fails scenario 4's, 11's and 12's p99 target instead of leaving the statistics;
 * and the recorded runs of several nodes (scenarios 11 and 12): overlaps, and one window over them.
 */
import t from 'tap'
import { performance } from 'node:perf_hooks'
import { countOverlaps, keepNonFinite, num, RunWindow, runsByReaktor, windowOfRuns, type LedgerRun } from '../../bench/lib.js'
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

t.test('a run of a reaktor that starts before its previous one ended is an overlap, whichever node ran them', async (t) => {
  const runs: LedgerRun[] = [[0, 3020, 3040], [0, 0, 20], [0, 10, 30], [1, 5, 25], [1, 25, 45]]
  const byReaktor = runsByReaktor(runs)
  t.same(byReaktor.get(0)?.map((r) => r[1]), [0, 10, 3020], 'in the order they started')
  t.equal(countOverlaps(byReaktor), 1, 'one starting as the other ends is none')
})

t.test('one window over the runs of every node: a move is no gap, a reaktor no node ran again is a stall', async (t) => {
  const runs: LedgerRun[] = [
    [0, 1000, 1020], [1, 1000, 1020], // before the window: each one's last start
    [0, 4020, 4040], // on another node: reaktor 0 moved
    [0, 7040, 7060],
    [0, 9000, 9020] // after the window: left out
  ]
  const w = windowOfRuns(runs, 2, 3000, 3000, 8000, 250)
  t.equal(w.runs, 2)
  t.equal(w.gapCount, 2, 'reaktor 0 ran twice in the window, each run a gap')
  t.equal(w.gapP50, 20)
  t.equal(w.stalled, 1, 'reaktor 1 did not run again')
  t.equal(w.gapMax, Infinity)
  // 2 runs; plus what each had waited at the end, in periods (reaktor 0 960 ms; reaktor 1 over a period: 1), minus the same at the start (2000 ms each).
  t.ok(Math.abs(w.cycles - (2 + 960 / 3000 + 1 - 2 * 2000 / 3000)) < 1e-9, `cycles ${w.cycles}`)
})
