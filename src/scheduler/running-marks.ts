import type { RunningMark } from './flush-store.js'
import type { RunRecord } from './reaktor-store.js'

/** The run in flight of one reaktor on this node (one object per reaktor, reused run after run). */
interface Flight {
  reaktorId: string
  /** Null between runs. */
  runId: string | null
  startedAt: number
  partition: number
  generation: string
  /** Its running_since is written (or in the flush being written): its end must clear it. */
  marked: boolean
}

/** Marks the epoch: clears nothing (no run started before it). */
const NO_CLEAR = 0

/**
 * `running_since` bookkeeping of the batched flush: which runs are in flight, which of them a flush
 * has written, and which aborted runs must clear what was written. A run that starts and ends
 * between two flushes is never written: it costs a Map lookup and a Set insert and delete.
 */
export class RunningMarks {
  private readonly flights = new Map<string, Flight>()
  /** Runs in flight whose running_since is not written yet. */
  private readonly unmarked = new Set<Flight>()
  /** Aborted runs whose running_since was written (results clear theirs in their own row). */
  private readonly clears = new Map<string, RunningMark>()

  /** Something to write at the next flush. */
  get due (): boolean {
    return this.unmarked.size > 0 || this.clears.size > 0
  }

  started (reaktorId: string, runId: string, startedAt: number, partition: number, generation: string): void {
    let flight = this.flights.get(reaktorId)
    if (flight === undefined) {
      flight = { reaktorId, runId, startedAt, partition, generation, marked: false }
      this.flights.set(reaktorId, flight)
    } else {
      flight.runId = runId
      flight.startedAt = startedAt
      flight.partition = partition
      flight.generation = generation
      flight.marked = false
    }
    this.unmarked.add(flight)
  }

  /** A run's end is being recorded: returns its flight if its running_since was written. */
  ended (reaktorId: string, runId: string): Flight | undefined {
    const flight = this.flights.get(reaktorId)
    if (flight === undefined || flight.runId !== runId) return undefined
    flight.runId = null
    this.unmarked.delete(flight)
    return flight.marked ? flight : undefined
  }

  /** An aborted run writes no result row: its written running_since is cleared by a mark of its own. */
  aborted (reaktorId: string, runId: string, startedAt: number): void {
    const flight = this.ended(reaktorId, runId)
    if (flight !== undefined) this.clears.set(reaktorId, { reaktorId, since: null, clearBefore: startedAt, partition: flight.partition, generation: flight.generation })
  }

  /**
   * For a flush of these results: each result's running_since (its reaktor's run in flight, if
   * any), and the marks of the other reaktors (runs in flight, aborted runs to clear). A clear of a
   * reaktor with a result here waits for the next flush (one row is updated once per statement).
   * `undo(from)` puts back what the rows from `from` on carried, when their statement failed.
   */
  take (results: readonly RunRecord[]): { since: Array<number | null>, marks: RunningMark[], undo: (from: number) => void } {
    const sent: Array<[Flight, string]> = []
    const send = (flight: Flight): number => {
      this.unmarked.delete(flight)
      flight.marked = true
      sent.push([flight, flight.runId!])
      return flight.startedAt
    }
    const since = results.map((r) => {
      const flight = this.flights.get(r.reaktorId)
      return flight?.runId == null ? null : send(flight)
    })
    const marks: RunningMark[] = []
    const marked = new Map<string, RunningMark>()
    // Clears are rare (aborted runs that were marked): the set of ids with a result only for them.
    const withResult = new Set(this.clears.size > 0 ? results.map((r) => r.reaktorId) : [])
    for (const [id, clear] of this.clears) {
      if (withResult.has(id)) continue
      this.clears.delete(id)
      marks.push(clear)
      marked.set(id, clear)
    }
    // send() deletes the flight being visited, which a Set's iteration allows: no copy of the set.
    for (const flight of this.unmarked) {
      const at = send(flight)
      const clear = marked.get(flight.reaktorId)
      // A clear and a new run of the same reaktor: one row, the new run wins when its partition is current.
      if (clear !== undefined) { clear.since = at; clear.partition = flight.partition; clear.generation = flight.generation } else {
        marks.push({ reaktorId: flight.reaktorId, since: at, clearBefore: NO_CLEAR, partition: flight.partition, generation: flight.generation })
      }
    }
    const undo = (from: number): void => {
      for (const [flight, runId] of sent) {
        if (flight.runId !== runId) continue
        flight.marked = false
        this.unmarked.add(flight)
      }
      for (const mark of marks.slice(from)) {
        if (mark.clearBefore !== NO_CLEAR && !this.clears.has(mark.reaktorId)) this.clears.set(mark.reaktorId, { ...mark, since: null })
      }
    }
    return { since, marks, undo }
  }
}
