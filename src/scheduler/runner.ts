import { randomUUID } from 'node:crypto'
import type { RegisteredPollingReaktor } from '../apps/types.js'
import type { PollingAktor } from '../sdk/types.js'
import type { SchedulerLogger } from './logger.js'
import type { RunRecord } from './store.js'

/** setTimeout's ceiling (~24.8 days); longer waits are taken in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1

export class RunTimeoutError extends Error {
  constructor (timeoutMs: number) {
    super(`run timed out after ${timeoutMs} ms`)
    this.name = 'RunTimeoutError'
  }
}

export class RunStoppedError extends Error {
  constructor (reason: string) {
    super(`run aborted: ${reason}`)
    this.name = 'RunStoppedError'
  }
}

export interface RunnerOptions {
  reaktorId: string
  reaktor: RegisteredPollingReaktor
  effectiveIntervalMs: number
  /** `state_version` this runner was started under (its results apply only while it matches). */
  version: string
  /** Carried over from the stored record, so a takeover continues the count. */
  consecutiveFailures: number
  nodeId: string
  log: SchedulerLogger
  now: () => number
  /**
   * Asked right before each run: is the lock connection alive and is this runner still the owner?
   * False skips the run (the scheduler is fencing or releasing this runner at that moment).
   */
  mayRun: () => boolean | Promise<boolean>
  /** Every finished run (not those ended by halt), for the batched flush. */
  onRunEnd: (record: RunRecord) => void
}

/**
 * Times ONE owned reaktor (DESIGN.md section 4): runs one at a time, `true` → the next run at once
 * (through setImmediate, so a long drain never starves I/O), `false` or a failure → one effective
 * interval after the run ended. `createReaktor()` is called once per runner, i.e. once per start
 * or takeover (again on the next run if it threw), so an aktor may keep state across runs of one
 * start but never across a stop.
 */
export class ReaktorRunner {
  private timer: NodeJS.Timeout | undefined
  private immediate: NodeJS.Immediate | undefined
  private controller: AbortController | undefined
  private inFlight: Promise<void> | undefined
  private aktor: PollingAktor | undefined
  private halted = false
  /** Handover: no new run is scheduled, but the in-flight one finishes and is recorded. */
  private finishing = false
  private started = false
  private failures: number
  /** Runs started by this runner (tests, metrics). */
  runs = 0

  constructor (private readonly opts: RunnerOptions) {
    this.failures = opts.consecutiveFailures
  }

  get version (): string {
    return this.opts.version
  }

  get running (): boolean {
    return this.inFlight !== undefined
  }

  /** Starts timing: the first run at `firstRunAt` (epoch ms), at once when null, due or overdue. */
  start (firstRunAt: number | null): void {
    if (this.started) throw new Error('a runner starts once')
    this.started = true
    // A stored next run in the past means one run now, never a burst of the missed ones.
    this.scheduleAt(firstRunAt ?? this.opts.now())
  }

  /**
   * Stops for good: nothing more is scheduled, the in-flight run's signal is aborted and its
   * result ignored. Resolves when that run has settled (the aktor may ignore its signal; the
   * caller decides how long to wait, and keeps the lock until then so runs never overlap).
   */
  async halt (reason = 'stopped'): Promise<void> {
    if (!this.halted) {
      this.halted = true
      if (this.timer !== undefined) clearTimeout(this.timer)
      if (this.immediate !== undefined) clearImmediate(this.immediate)
      this.timer = undefined
      this.immediate = undefined
      this.controller?.abort(new RunStoppedError(reason))
    }
    await this.inFlight
  }

  /**
   * Handover between runs: nothing more is scheduled, the in-flight run (if any) is NOT aborted;
   * its result is recorded as usual. Resolves once no run is in flight, so the caller can flush
   * that result and then release the lock: the next owner continues from it. A later halt()
   * still aborts the run (stop, fencing, shutdown win over a handover).
   */
  async finish (): Promise<void> {
    if (!this.halted && !this.finishing) {
      this.finishing = true
      if (this.timer !== undefined) clearTimeout(this.timer)
      if (this.immediate !== undefined) clearImmediate(this.immediate)
      this.timer = undefined
      this.immediate = undefined
    }
    await this.inFlight
  }

  private scheduleAt (at: number): void {
    if (this.halted || this.finishing) return
    const delay = at - this.opts.now()
    if (delay <= 0) {
      this.immediate = setImmediate(() => {
        this.immediate = undefined
        this.launch()
      })
    } else {
      this.timer = setTimeout(() => {
        this.timer = undefined
        if (delay > MAX_TIMER_MS) this.scheduleAt(at)
        else this.launch()
      }, Math.min(delay, MAX_TIMER_MS))
    }
  }

  private launch (): void {
    const run: Promise<void> = this.runOnce().finally(() => {
      if (this.inFlight === run) this.inFlight = undefined
    })
    this.inFlight = run
  }

  private async runOnce (): Promise<void> {
    if (this.halted || this.finishing || !(await this.opts.mayRun()) || this.halted || this.finishing) return
    const { reaktorId, reaktor, now } = this.opts
    const runId = randomUUID()
    let startedAt = now()
    const controller = new AbortController()
    this.controller = controller
    this.runs++
    const log = this.opts.log.child({ reaktorId, runId })
    const timeout = setTimeout(() => controller.abort(new RunTimeoutError(reaktor.timeoutMs)), reaktor.timeoutMs)
    let result: unknown
    let error: unknown
    try {
      this.aktor ??= reaktor.registration.createReaktor()
      const context = { signal: controller.signal, log, settings: reaktor.app.settings, reaktorId, runId }
      // lastRun is the moment the aktor is called (what the aktor itself would see as its start).
      startedAt = now()
      result = await this.aktor(undefined, context)
    } catch (err) {
      error = err
    } finally {
      clearTimeout(timeout)
      this.controller = undefined
    }
    // Stopped, released or fenced meanwhile: the result schedules (and records) nothing.
    if (this.halted) return
    if (error === undefined && controller.signal.aborted) error = controller.signal.reason
    if (error === undefined && typeof result !== 'boolean') {
      error = new TypeError(`run returned ${result === null ? 'null' : typeof result}; a polling reaktor must return a boolean`)
    }
    const endedAt = now()
    let nextRun: number
    if (error === undefined) {
      this.failures = 0
      nextRun = result === true ? endedAt : endedAt + this.opts.effectiveIntervalMs
      log.debug({ reaktorId, runId, result, ms: endedAt - startedAt }, 'polling reaktor run finished')
    } else {
      this.failures++
      nextRun = endedAt + this.opts.effectiveIntervalMs
      log.warn({ err: error, reaktorId, runId, consecutiveFailures: this.failures }, 'polling reaktor run failed')
    }
    this.opts.onRunEnd({
      reaktorId,
      runId,
      lastRun: new Date(startedAt),
      nextRun: new Date(nextRun),
      lastError: error === undefined ? null : describe(error),
      consecutiveFailures: this.failures,
      version: this.opts.version,
      owner: this.opts.nodeId
    })
    this.scheduleAt(nextRun)
  }
}

function describe (err: unknown): string {
  const text = err instanceof Error ? `${err.name}: ${err.message}` : `non-error thrown: ${String(err)}`
  return text.length > 2000 ? `${text.slice(0, 2000)}…` : text
}
