import { writeBulk, type BulkTarget, type BulkWrite } from './bulk-store.js'
import { UnknownReaktorError } from './options.js'
import { writeRunRequest } from './run-now.js'
import type { PartitionRunners, SchedulerContext } from './partition-runners.js'
import * as store from './reaktor-store.js'

export type ControlAction = 'start' | 'stop'

/** What a bulk action did to one reaktor. */
export type ControlResult = 'started' | 'already_running' | 'stopped' | 'already_stopped' | 'not_found'

export interface ControlOutcome {
  reaktorId: string
  result: ControlResult
}

/** The result of a reaktor whose state the action changed. */
export function isChange (result: ControlResult): boolean {
  return result === 'started' || result === 'stopped'
}

const RESULTS = {
  start: { changed: 'started', unchanged: 'already_running' },
  stop: { changed: 'stopped', unchanged: 'already_stopped' }
} as const satisfies Record<ControlAction, { changed: ControlResult, unchanged: ControlResult }>

/**
 * Start and stop, of one reaktor or many, through one path: the state is written first (durable
 * before the caller is answered; its NOTIFY tells every node), then this node's runners learn of
 * it at once.
 */
export class ReaktorControl {
  constructor (private readonly ctx: SchedulerContext, private readonly runners: PartitionRunners) {}

  async start (reaktorId: string): Promise<boolean> {
    const t = this.target(reaktorId)
    const written = await store.writeStart(this.ctx.settings.db, reaktorId, t.interval, new Date(this.ctx.settings.now()), t.partition)
    this.applied('start', [{ reaktorId, ...written }])
    return written.changed
  }

  async stop (reaktorId: string): Promise<boolean> {
    const t = this.target(reaktorId)
    const written = await store.writeStop(this.ctx.settings.db, reaktorId, t.interval, new Date(this.ctx.settings.now()), t.partition)
    this.applied('stop', [{ reaktorId, ...written }])
    return written.changed
  }

  /** Writes a run request its owner acts on (run-now.ts). False: the reaktor is stopped. */
  async run (reaktorId: string): Promise<boolean> {
    this.target(reaktorId)
    return await writeRunRequest(this.ctx.settings.db, reaktorId, new Date(this.ctx.settings.now()))
  }

  /**
   * Many reaktors in one transaction, answered per id in the order given. Ids this node has not
   * registered are `not_found` and written nowhere (as the single start and stop refuse them).
   */
  async bulk (action: ControlAction, ids: readonly string[]): Promise<ControlOutcome[]> {
    const known = [...new Set(ids)].filter((id) => this.ctx.settings.reaktors.has(id))
    const written = await writeBulk(this.ctx.settings.db, action, known.map((id) => this.target(id)), new Date(this.ctx.settings.now()))
    this.applied(action, written)
    const changed = new Map(written.map((w) => [w.reaktorId, w.changed]))
    return ids.map((reaktorId) => {
      const c = changed.get(reaktorId)
      return { reaktorId, result: c === undefined ? 'not_found' : RESULTS[action][c ? 'changed' : 'unchanged'] }
    })
  }

  private target (reaktorId: string): BulkTarget {
    const reaktor = this.ctx.settings.reaktors.get(reaktorId)
    if (reaktor === undefined) throw new UnknownReaktorError(reaktorId)
    return { reaktorId, interval: reaktor.registration.interval, partition: this.ctx.partitionOfId.get(reaktorId) ?? null }
  }

  private applied (action: ControlAction, writes: readonly BulkWrite[]): void {
    for (const w of writes) {
      // Synchronously with the answer: a reconcile pass that read the row before this write can
      // no longer start a runner from that read (ensureRunner refuses older versions).
      this.runners.noteWrittenVersion(w.reaktorId, w.version)
      if (action === 'stop') {
        this.runners.releaseRunner(w.reaktorId)
        // A handover in progress waits for its run to end; a stop aborts that run at once.
        void this.runners.draining.get(w.reaktorId)?.runner.halt('stopped')
      }
    }
    this.ctx.requestReconcile(writes.map((w) => w.reaktorId))
  }
}
