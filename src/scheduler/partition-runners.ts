import { performance } from 'node:perf_hooks'
import type { RunResultBatcher } from './batcher.js'
import type { LockConnection } from './ownership/lock-connection.js'
import type { SchedulerLogger } from './logger.js'
import { effectiveIntervalMs, type SchedulerSettings } from './options.js'
import { ReaktorRunner } from './reaktor-runner.js'
import type * as store from './reaktor-store.js'

/** What the parts of the scheduler share: the Scheduler owns it, its parts read and update it. */
export interface SchedulerContext {
  readonly settings: SchedulerSettings
  /** The scheduler's own logger (runs log through `settings.log`, bound to their reaktor). */
  readonly log: SchedulerLogger
  readonly lock: LockConnection
  readonly batcher: RunResultBatcher
  /** The cluster's partition count (known once started) and each registered id's partition. */
  partitions: number
  readonly partitionOfId: Map<string, number>
  /** Grows each time the lock connection is lost: locks taken under an older epoch are gone. */
  epoch: number
  /** Membership held on the current connection: passes run only then (not between connect and join). */
  joined: boolean
  running: () => boolean
  requestReconcile: (ids?: Iterable<string>) => void
}

/** A partition whose lock this node holds. */
export interface HeldPartition {
  partition: number
  /** Generation of the partition row when this node took it (fences late writes after a takeover). */
  generation: string
  /** Lock-connection generation the lock was taken on. */
  epoch: number
  /** Runners of this partition's reaktors. */
  runners: Map<string, ReaktorRunner>
  /** Being handed over or given back: no new runner starts in it. */
  leaving: boolean
  /** The last runs of runners let go of in this partition (stop, restart), until they settle. */
  settling: Set<Promise<void>>
  /**
   * performance.now() before which no run of this partition starts: taken from a session that
   * ended without releasing it, whose holder may not have aborted its runs yet (the fencing grace).
   */
  runsFrom: number
}

/** A run aborted by the shutdown, until it has settled. */
export interface HaltedRun {
  reaktorId: string
  partition: number
  done: Promise<unknown>
  settled: boolean
}

/** A runner that no longer owns its reaktor and whose last run has not settled yet. */
interface Draining {
  done: Promise<void>
  runner: ReaktorRunner
  partition: number
}

/**
 * The partitions this node holds and the runners of their reaktors: starting a runner (never from
 * a read older than a start/stop this node acknowledged), letting one go (its last run settles in
 * `draining` before the reaktor can start again), and the ownership check before each run.
 */
export class PartitionRunners {
  /** Partitions this node holds the lock of. */
  readonly held = new Map<number, HeldPartition>()
  /** Runners let go of (stop, restart, handover, fencing) whose last run has not settled yet. */
  readonly draining = new Map<string, Draining>()
  /**
   * The newest `state_version` this node wrote (start/stop) per reaktor: a runner is never started
   * from an older read of the row, i.e. a read that predates a stop this node acknowledged.
   */
  private readonly writtenVersion = new Map<string, bigint>()
  /**
   * Runs requested (run now) for reaktors of a held partition that had no runner at that moment:
   * one being started may have been read before the request, so its first run is at once. Only
   * for the partition as it was held then (a later holding of it starts from the row again).
   */
  private readonly runRequested = new Map<string, HeldPartition>()

  constructor (private readonly ctx: SchedulerContext) {}

  /** Ids this node currently owns (and times). */
  ownedIds (): string[] {
    const ids: string[] = []
    for (const hp of this.held.values()) if (!hp.leaving) ids.push(...hp.runners.keys())
    return ids.sort()
  }

  /** How many reaktors this node owns (ownedIds without building and sorting the list). */
  ownedCount (): number {
    let n = 0
    for (const hp of this.held.values()) if (!hp.leaving) n += hp.runners.size
    return n
  }

  /** Every runner of this node: owned ones and those still settling. */
  all (): ReaktorRunner[] {
    const runners: ReaktorRunner[] = []
    for (const hp of this.held.values()) runners.push(...hp.runners.values())
    for (const d of this.draining.values()) runners.push(d.runner)
    return runners
  }

  noteWrittenVersion (reaktorId: string, version: string | null): void {
    if (version === null) return
    const v = BigInt(version)
    if (v > (this.writtenVersion.get(reaktorId) ?? -1n)) this.writtenVersion.set(reaktorId, v)
  }

  /**
   * Fencing: every lock is gone, so every run stops NOW and every partition is forgotten. Runs of
   * handovers and stops in progress are aborted too. Returns the ids whose runs were aborted.
   */
  haltAll (reason: string): string[] {
    const aborted: string[] = []
    for (const hp of this.held.values()) {
      for (const [id, runner] of hp.runners) {
        aborted.push(id)
        this.drain(id, hp.partition, runner, runner.halt(reason))
      }
    }
    this.held.clear()
    for (const d of this.draining.values()) void d.runner.halt(reason)
    return aborted
  }

  /** Shutdown: every run (owned or settling) is aborted; each is tracked, with its partition, until it settles. */
  haltForShutdown (): HaltedRun[] {
    const runs: HaltedRun[] = []
    const track = (reaktorId: string, partition: number, done: Promise<unknown>): void => {
      const run: HaltedRun = { reaktorId, partition, done, settled: false }
      run.done = done.finally(() => { run.settled = true })
      runs.push(run)
    }
    for (const hp of this.held.values()) {
      for (const [id, runner] of hp.runners) track(id, hp.partition, runner.halt('shutdown'))
      hp.runners.clear()
    }
    for (const [id, d] of this.draining) {
      void d.runner.halt('shutdown')
      track(id, d.partition, d.done)
    }
    return runs
  }

  /**
   * An app version switch: the runners of `ids` on this node (owned, or finishing a handover)
   * take the new registration from their next run.
   */
  switchRegistrations (ids: Iterable<string>): void {
    for (const id of ids) {
      const reaktor = this.ctx.settings.reaktors.get(id)
      const p = this.ctx.partitionOfId.get(id)
      const runner = p === undefined ? undefined : this.held.get(p)?.runners.get(id)
      if (reaktor !== undefined && runner !== undefined) runner.switchTo(reaktor, effectiveIntervalMs(reaktor, this.ctx.settings.minIntervalMs))
    }
  }

  /** The held partition a registered id runs in, when this node may start it there. */
  heldFor (reaktorId: string): HeldPartition | undefined {
    const p = this.ctx.partitionOfId.get(reaktorId)
    const hp = p === undefined ? undefined : this.held.get(p)
    return hp === undefined || hp.leaving || hp.epoch !== this.ctx.epoch ? undefined : hp
  }

  /**
   * Starts timing a running reaktor of a held partition. Refused when the scheduler is no longer
   * running, the id has a runner or one still settling (it is looked at again once that settled),
   * or this node has since written a newer version of it (a stop acknowledged after the read).
   */
  ensureRunner (row: store.ScheduleRow): void {
    const id = row.reaktorId
    const reaktor = this.ctx.settings.reaktors.get(id)
    const hp = this.heldFor(id)
    if (reaktor === undefined || hp === undefined || !this.ctx.running() || hp.runners.has(id) || this.draining.has(id)) return
    if (BigInt(row.version) < (this.writtenVersion.get(id) ?? -1n)) {
      this.ctx.log.debug({ reaktorId: id, version: row.version }, 'read predates a start/stop written by this node; not started')
      return
    }
    const runner: ReaktorRunner = new ReaktorRunner({
      reaktorId: id,
      reaktor,
      effectiveIntervalMs: effectiveIntervalMs(reaktor, this.ctx.settings.minIntervalMs),
      version: row.version,
      consecutiveFailures: row.consecutiveFailures,
      partition: hp.partition,
      generation: hp.generation,
      log: this.ctx.settings.log,
      now: this.ctx.settings.now,
      mayRun: (fresh) => this.mayRun(id, runner, fresh),
      onRecord: (record) => this.ctx.batcher.record(record),
      onRunStart: (runId, startedAt) => this.ctx.batcher.runStarted(id, runId, startedAt, hp.partition, hp.generation),
      onAborted: (runId, startedAt, durationMs, error) => this.ctx.batcher.runAborted(id, runId, startedAt, durationMs, error),
      onRunEnd: (record, outcome, durationMs) => {
        this.ctx.batcher.record(record)
        if (this.ctx.settings.onRunEnd === undefined) return
        try {
          this.ctx.settings.onRunEnd({ reaktorId: id, outcome, durationMs })
        } catch (err) {
          this.ctx.log.warn({ err, reaktorId: id }, 'onRunEnd observer failed')
        }
      }
    })
    hp.runners.set(id, runner)
    // Continue from the stored next run: due or overdue means exactly one run now (after the
    // fencing grace of a partition taken from an ended session).
    const from = this.earliestRun(hp)
    const requested = this.runRequested.get(id) === hp
    this.runRequested.delete(id)
    runner.start(requested ? from : Math.max(row.nextRun?.getTime() ?? from, from))
  }

  /** Now, or (epoch ms) the end of the fencing grace of a partition taken from an ended session. */
  private earliestRun (hp: HeldPartition): number {
    return this.ctx.settings.now() + Math.max(0, hp.runsFrom - performance.now())
  }

  /**
   * A run was requested (run-now.ts): the owner's runner runs at once, or right after its run in
   * flight. Ignored where the partition is not held: its holder, or the next one, acts on it.
   * `requestedAt`: when it was made, so that a run that started since is taken as serving it.
   */
  runNow (reaktorId: string, requestedAt?: number): void {
    const hp = this.heldFor(reaktorId)
    if (hp === undefined || !this.ctx.running()) return
    const runner = hp.runners.get(reaktorId)
    if (runner === undefined) this.runRequested.set(reaktorId, hp)
    else runner.runNow(this.earliestRun(hp), requestedAt)
  }

  /** Stops the runner of a reaktor (stop, restart): its partition stays held, the id is looked at again once the run settled. */
  /**
   * A reaktor no longer registered (its app's new version dropped it): no run starts any more, and
   * the one in flight, if any, finishes as a switch lets every run finish.
   */
  retireRunner (reaktorId: string): void {
    const hp = this.held.get(this.ctx.partitionOfId.get(reaktorId) ?? -1)
    const runner = hp?.runners.get(reaktorId)
    if (hp === undefined || runner === undefined) return
    hp.runners.delete(reaktorId)
    this.drain(reaktorId, hp.partition, runner, runner.finish())
  }

  releaseRunner (reaktorId: string): void {
    const p = this.ctx.partitionOfId.get(reaktorId)
    const hp = p === undefined ? undefined : this.held.get(p)
    const runner = hp?.runners.get(reaktorId)
    if (hp === undefined || runner === undefined) return
    hp.runners.delete(reaktorId)
    this.drain(reaktorId, hp.partition, runner, runner.halt('stopped'))
  }

  /**
   * Keeps a runner that no longer owns its reaktor in `draining` until `work` (its last run) has
   * settled, then lets reconcile look at the id again.
   */
  drain (reaktorId: string, partition: number, runner: ReaktorRunner, work: Promise<void>): void {
    const hp = this.held.get(partition)
    const done: Promise<void> = work.catch((err) => {
      this.ctx.log.warn({ err, reaktorId }, 'polling reaktor runner did not settle cleanly')
    }).finally(() => {
      if (this.draining.get(reaktorId)?.done === done) this.draining.delete(reaktorId)
      hp?.settling.delete(done)
      this.ctx.requestReconcile([reaktorId])
    })
    hp?.settling.add(done)
    this.draining.set(reaktorId, { done, runner, partition })
  }

  /** Before each run: still the owner, and the lock connection answered recently (else, or when `fresh`, ping it). */
  private mayRun (id: string, runner: ReaktorRunner, fresh: boolean): boolean | Promise<boolean> {
    if (!this.ctx.running() || this.heldFor(id)?.runners.get(id) !== runner || !this.ctx.lock.alive) return false
    if (!fresh && performance.now() - this.ctx.lock.lastOkAt <= this.ctx.settings.lockCheckMaxAgeMs) return true
    return this.ctx.lock.ping().then((ok) => ok && this.heldFor(id)?.runners.get(id) === runner)
  }
}
