import t from 'tap'
import { RunningMarks } from '../../src/scheduler/running-marks.js'
import type { RunRecord } from '../../src/scheduler/reaktor-store.js'

/**
 * The flush updates polling_reaktors twice in one statement (the marks in a CTE, the results in the
 * main update); PostgreSQL leaves it undefined which of two updates of one row wins. So no flush may
 * name a reaktor both as a mark and as a result, nor twice as a mark, whatever the order of starts,
 * ends, timeouts, aborts, failed statements and new runners.
 */

/** A small deterministic generator (mulberry32): every run of the test replays the same sequences. */
function generator (seed: number): () => number {
  let a = seed
  return () => {
    a = (a + 0x6D2B79F5) | 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

function record (reaktorId: string, runId: string, lastRun: number, durationMs: number | null): RunRecord {
  return { reaktorId, runId, lastRun, nextRun: null, lastError: null, consecutiveFailures: 0, outcome: durationMs === null ? 'timed_out' : 'no_work', durationMs, successAt: null, failureAt: null, version: '1', partition: 0, generation: '1' }
}

t.test('a flush never names one reaktor twice: not as a mark and a result, not as two marks', async (t) => {
  const ids = ['a', 'b', 'c']
  let flushes = 0
  const violations: string[] = []
  for (let seed = 1; seed <= 200; seed++) {
    const random = generator(seed)
    const marks = new RunningMarks()
    /** Per reaktor: the run in flight, as the batcher was told of it. */
    const inFlight = new Map<string, { runId: string, startedAt: number }>()
    const pending = new Map<string, RunRecord>()
    let clock = 1000
    let n = 0
    for (let step = 0; step < 60; step++) {
      clock += 10
      const id = ids[Math.floor(random() * ids.length)]
      const run = inFlight.get(id)
      const r = random()
      if (run === undefined) {
        const runId = `run-${++n}`
        inFlight.set(id, { runId, startedAt: clock })
        marks.started(id, runId, clock, 0, '1')
      } else if (r < 0.3) {
        // Ended: its result (the batcher tells the marks only once it has a duration).
        pending.set(id, record(id, run.runId, run.startedAt, clock - run.startedAt))
        marks.ended(id, run.runId)
        inFlight.delete(id)
      } else if (r < 0.45) {
        // Timed out: a result while the run is still in flight.
        pending.set(id, record(id, run.runId, run.startedAt, null))
      } else if (r < 0.65) {
        // Aborted by a stop, a handover, a fencing: no result, a clear if it was written.
        marks.aborted(id, run.runId, run.startedAt)
        inFlight.delete(id)
      } else {
        const results = [...pending.values()]
        pending.clear()
        const taken = marks.take(results)
        flushes++
        const resultIds = new Set(results.map((x) => x.reaktorId))
        const markIds = taken.marks.map((m) => m.reaktorId)
        if (new Set(markIds).size !== markIds.length || markIds.some((m) => resultIds.has(m)) || taken.since.length !== results.length) {
          violations.push(`seed ${seed} step ${step}: marks ${markIds.join()}, results ${[...resultIds].join()}`)
        }
        // Now and then the statement fails: what it carried comes back for the next flush.
        if (random() < 0.3) {
          taken.undo(0)
          for (const x of results) if (!pending.has(x.reaktorId)) pending.set(x.reaktorId, x)
        }
      }
    }
  }
  t.ok(flushes > 1000, `${flushes} flushes looked at`)
  t.same(violations.slice(0, 5), [], `no reaktor named twice in a flush (${violations.length} flushes did)`)
})
