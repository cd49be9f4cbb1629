import { performance } from 'node:perf_hooks'
import { MAX_TIMER_MS } from '../lib/duration.js'
import { LazyAbort } from '../apps/lazy-abort.js'
import type { RegisteredPollingReaktor } from '../apps/types.js'
import type { RunOutcomeName } from '../db/schema.js'
import type { PollingAktor } from '../sdk/types.js'
import type { SchedulerLogger } from './logger.js'
import { newRunId } from './run-id.js'
import type { RunRecord } from './reaktor-store.js'

/**
 * A run whose turn of the event loop comes this much later than it was queued may have waited
 * through a stall: it lets the loop poll I/O once more before it checks that it still owns its reaktor.
 */
const LATE_TURN_MS = 100

export class RunTimeoutError extends Error {
  readonly code = 'REAKTOR_RUN_TIMEOUT'
  constructor (timeoutMs: number) {
    super(`run timed out after ${timeoutMs} ms`)
    this.name = 'RunTimeoutError'
  }
}

export class RunStoppedError extends Error {
  readonly code = 'REAKTOR_RUN_STOPPED'
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
  /** The partition the reaktor belongs to, and its generation when this node took it. */
  partition: number
  generation: string
  log: SchedulerLogger
  now: () => number
  /**
   * Asked right before each run: is the lock connection alive and is this runner still the owner?
   * False skips the run (the scheduler is fencing or releasing this runner at that moment).
   * `fresh`: the lock connection must answer now (after a stall), not only have answered lately.
   */
  mayRun: (fresh: boolean) => boolean | Promise<boolean>
  /**
   * Every finished run (not those ended by halt), and every run at its timeout: the record for the
   * batched flush, and how it went; `thrown` holds what the aktor (or createReaktor) threw, when it threw.
   */
  onRunEnd: (record: RunRecord, outcome: RunOutcome, durationMs: number, thrown?: { error: unknown }) => void
  /** A record to flush that counts no new run: a timed-out run that has settled since. */
  onRecord: (record: RunRecord) => void
  /** The aktor is being called (run history: a run still in flight at a flush shows as running). */
  onRunStart: (runId: string, startedAt: number) => void
  /** A run ended by halt() has settled: it records nothing but its history row. */
  onAborted: (runId: string, startedAt: number, durationMs: number, error: string) => void
}

/** One run's abort side (its signal made only if the aktor reads it), with the run's id for the logs. */
class RunAbort extends LazyAbort {
  /** When the aktor was called (epoch ms). */
  startedAt = 0
  /** Its timeout fired while it was in flight: it was recorded as failed (and blocked) then. */
  timedOut = false
  constructor (readonly runId: string) {
    super()
  }
}

/** How a finished run went (the `outcome` label of `reaktor_polling_runs_total`). */
export type RunOutcome = 'more_work' | 'no_work' | 'failed'

/**
 * Times ONE owned reaktor (docs/operating.md "Operating polling reaktors"): runs one at a time, `true` → the next run at once
 * (through setImmediate, so a long drain never starves I/O), `false` or a failure → one effective
 * interval after the run ended. `createReaktor()` is called once per runner, i.e. once per start
 * or takeover (again on the next run if it threw), so an aktor may keep state across runs of one
 * start but never across a stop.
 */
export class ReaktorRunner {
  private timer: NodeJS.Timeout | undefined
  /** The timer of "one interval after the run ended", re-armed with refresh() (no allocation per run). */
  private intervalTimer: NodeJS.Timeout | undefined
  private immediate: NodeJS.Immediate | undefined
  private queuedAt = 0 // performance.now() when the next run was queued for the next turn of the event loop
  /** The run's timeout, likewise re-armed per run; it acts only while `current` is that run. */
  private timeoutTimer: NodeJS.Timeout | undefined
  private timeoutFor: number | undefined
  private current: RunAbort | undefined
  private inFlight: Promise<void> | undefined
  private aktor: PollingAktor | undefined
  /** The result of the latest run, one object reused per run (it waits in the batch for a flush). */
  private record: RunRecord | undefined
  private halted = false
  /** Handover: no new run is scheduled, but the in-flight one finishes and is recorded. */
  private finishing = false
  private started = false
  /** A run was asked for (runNow) while one was in flight: one more starts as soon as it ends. */
  private runRequested = false
  /** When the latest run of this runner called its aktor (epoch ms): its `lastRun`, as it is stored. */
  private lastStartedAt = -Infinity
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

  /** Its run in flight passed its timeout (recorded as blocked). */
  get blocked (): boolean {
    return this.current?.timedOut === true
  }

  /** An app version switch: the next run uses `reaktor` (a run in flight keeps its aktor), its timeout and the new interval (a wait under way restarts from now: refresh() would keep the old duration). */
  switchTo (reaktor: RegisteredPollingReaktor, effectiveIntervalMs: number): void {
    if (reaktor.timeoutMs !== this.opts.reaktor.timeoutMs) this.timeoutFor = undefined
    const same = effectiveIntervalMs === this.opts.effectiveIntervalMs
    Object.assign(this.opts, { reaktor, effectiveIntervalMs })
    this.aktor = undefined
    if (same || this.intervalTimer === undefined) return
    const waiting = !this.running && this.immediate === undefined && this.timer === undefined
    clearTimeout(this.intervalTimer); this.intervalTimer = undefined
    if (waiting) this.scheduleInterval()
  }

  /** Starts timing: the first run at `firstRunAt` (epoch ms), at once when null, due or overdue. */
  start (firstRunAt: number | null): void {
    if (this.started) throw new Error('a runner starts once')
    this.started = true
    // A stored next run in the past means one run now, never a burst of the missed ones.
    this.scheduleAt(firstRunAt ?? this.opts.now())
  }

  /**
   * Run now: at once (not before `at`, epoch ms) when no run is in flight, else one more run right
   * after the one in flight has ended (or, timed out, settled), however many requests come
   * meanwhile. The schedule goes on from that run as from any other. A request that comes before
   * the in-flight run called its aktor is served by that run. False: halted or handed over.
   */
  runNow (at = this.opts.now(), requestedAt?: number): boolean {
    if (this.halted || this.finishing || !this.started) return false
    // A run that started after the request serves it (its notification was heard late). Strictly
    // after: both are read in whole milliseconds, and a request in the same millisecond as the
    // start may have come after it (a run ending within that millisecond, then the request), so a
    // tie runs once more rather than lose the request.
    if (requestedAt !== undefined && requestedAt < this.lastStartedAt) return true
    if (this.inFlight !== undefined) this.runRequested = true
    else if (this.immediate === undefined) { this.cancelScheduled(); this.scheduleAt(at) }
    return true
  }

  /** The run in flight has ended: the run requested meanwhile starts now, in place of its schedule. */
  private serveRunRequest (): void {
    if (!this.runRequested) return
    this.runRequested = false
    if (this.halted || this.finishing || this.immediate !== undefined) return
    this.cancelScheduled()
    this.launchSoon()
  }

  /**
   * Stops for good: nothing more is scheduled, the in-flight run's signal is aborted and its
   * result ignored. Resolves when that run has settled (the aktor may ignore its signal; the
   * caller decides how long to wait, and keeps the lock until then so runs never overlap).
   */
  async halt (reason = 'stopped'): Promise<void> {
    if (!this.halted) {
      this.halted = true
      this.cancelScheduled()
      this.current?.abort(new RunStoppedError(reason))
    }
    await this.inFlight
    this.clearTimeoutTimer()
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
      this.cancelScheduled()
    }
    await this.inFlight
    this.clearTimeoutTimer()
  }

  private clearTimeoutTimer (): void {
    if (this.inFlight !== undefined || this.timeoutTimer === undefined) return
    clearTimeout(this.timeoutTimer)
    this.timeoutTimer = undefined
  }

  private cancelScheduled (): void {
    if (this.timer !== undefined) clearTimeout(this.timer)
    if (this.intervalTimer !== undefined) clearTimeout(this.intervalTimer)
    if (this.immediate !== undefined) clearImmediate(this.immediate)
    this.timer = undefined
    this.intervalTimer = undefined
    this.immediate = undefined
  }

  private scheduleAt (at: number): void {
    if (this.halted || this.finishing) return
    const delay = at - this.opts.now()
    if (delay <= 0) {
      this.launchSoon()
    } else {
      // Longer waits are taken in steps; and a timer may fire a millisecond before the wall clock
      // reads `at` (timers and Date.now round differently): a run is never early, so wait that out.
      this.timer = setTimeout(() => {
        this.timer = undefined
        this.scheduleAt(at)
      }, Math.min(delay, MAX_TIMER_MS))
    }
  }

  /**
   * Runs start from setImmediate, never straight from a timer: timers fire before the event loop
   * polls I/O, so after a stall (a long GC pause, a paused process) every overdue timer would run
   * before the node has read that its lock session ended meanwhile. An immediate comes after the
   * poll; one that itself comes late (the stall fell between) waits one more turn (runOnce).
   */
  private launchSoon (): void {
    this.queuedAt = performance.now()
    this.immediate = setImmediate(() => {
      this.immediate = undefined
      this.launch()
    })
  }

  /** The next run one effective interval from now (the run just ended). */
  private scheduleInterval (): void {
    if (this.halted || this.finishing) return
    const interval = this.opts.effectiveIntervalMs
    if (interval > MAX_TIMER_MS) { this.scheduleAt(this.opts.now() + interval); return }
    if (this.intervalTimer === undefined) this.intervalTimer = setTimeout(() => this.launchSoon(), interval)
    else this.intervalTimer.refresh()
  }

  private launch (): void {
    // runOnce never rejects by design; should it ever, the reaktor must not stall silently and the
    // process must not die of an unhandled rejection.
    const run: Promise<void> = this.runOnce().then(() => {
      if (this.inFlight !== run) return
      this.inFlight = undefined
      this.serveRunRequest()
    }, (err) => {
      if (this.inFlight === run) this.inFlight = undefined
      this.safeLog('error', { reaktorId: this.opts.reaktorId, thrown: describe(err) }, 'polling reaktor runner failed unexpectedly')
    })
    this.inFlight = run
  }

  private onTimeout (run: RunAbort): void {
    // An aktor that ignores its signal keeps the reaktor blocked until it settles (runs never
    // overlap): say so now, in the log and in the status, not only when (if ever) it returns.
    const { reaktorId, reaktor } = this.opts
    this.safeLog('warn', { reaktorId, runId: run.runId, timeoutMs: reaktor.timeoutMs }, 'polling reaktor run timed out; its signal is aborted and no other run of it starts until this one settles')
    run.abort(new RunTimeoutError(reaktor.timeoutMs))
    run.timedOut = true
    this.failures++
    const lastError = `${describe(run.reason)}; still settling (its aktor has not returned since its signal was aborted): no other run of this reaktor starts until it does`
    // An aktor that honours the signal settles within moments and rewrites this before the flush.
    this.opts.onRunEnd(this.writeRecord(run, null, 'timed_out', null, lastError, true), 'failed', this.opts.now() - run.startedAt)
  }

  /** The runner's one record (it may be waiting in the batch), set to this run's result. */
  private writeRecord (run: RunAbort, nextRun: number | null, outcome: RunOutcomeName, durationMs: number | null, lastError: string | null, blocked: boolean): RunRecord {
    const { reaktorId, version, partition, generation } = this.opts
    const record = this.record ??= { reaktorId, runId: run.runId, lastRun: 0, nextRun: 0, lastError: null, consecutiveFailures: 0, blocked: false, outcome, durationMs, successAt: null, failureAt: null, version, partition, generation }
    record.runId = run.runId
    record.lastRun = run.startedAt
    record.nextRun = nextRun
    record.outcome = outcome
    record.durationMs = durationMs
    // The last failure's message stays until the next failure (a success does not clear it).
    if (lastError === null) record.successAt = run.startedAt
    else { record.failureAt = run.startedAt; record.lastError = lastError }
    record.consecutiveFailures = this.failures
    record.blocked = blocked
    return record
  }

  /**
   * A run recorded as failed at its timeout has settled: no longer blocked, and (unless the runner
   * was halted meanwhile) the next run one interval after it ended. Counted once, at the timeout.
   */
  private settleTimedOut (run: RunAbort, endedAt: number): void {
    try {
      const lastError = `${describe(run.reason)}; it settled ${endedAt - run.startedAt} ms after it started`
      this.opts.onRecord(this.writeRecord(run, endedAt + this.opts.effectiveIntervalMs, 'timed_out', endedAt - run.startedAt, lastError, false))
      this.safeLog('warn', { reaktorId: this.opts.reaktorId, runId: run.runId, error: lastError, consecutiveFailures: this.failures }, 'polling reaktor run failed: it timed out, and has settled now')
    } finally {
      this.scheduleInterval()
    }
  }

  private async runOnce (): Promise<void> {
    if (this.halted || this.finishing) return
    // Queued before a stall: let the loop poll I/O (a lost lock session) once more, then have the
    // ownership check ask the lock connection itself (one round trip shared by every late run)
    // rather than trust its last answer: a stall may also fall after that poll. Waiting instead
    // while turns keep coming late would never end under a sustained load (thousands of runs due at
    // once on a busy machine make every turn of immediates longer than LATE_TURN_MS).
    const late = performance.now() - this.queuedAt > LATE_TURN_MS
    if (late) {
      await new Promise((resolve) => setImmediate(resolve))
      if (this.halted || this.finishing) return
    }
    let may = false
    try {
      const answer = this.opts.mayRun(late)
      may = typeof answer === 'boolean' ? answer : await answer
    } catch (err) {
      this.safeLog('warn', { reaktorId: this.opts.reaktorId, thrown: describe(err) }, 'polling reaktor: ownership check failed; run skipped')
    }
    if (this.halted || this.finishing) return
    // Not now (the lock connection did not answer, say): try again an interval later rather than
    // never; a runner that really lost its reaktor is halted by the scheduler meanwhile.
    if (!may) { this.scheduleInterval(); return }
    this.runRequested = false
    const { reaktorId, reaktor, now } = this.opts
    const parentLog = this.opts.log
    const runId = newRunId(now())
    const run = new RunAbort(runId)
    run.startedAt = this.lastStartedAt = now()
    this.current = run
    this.runs++
    if (this.timeoutTimer === undefined || this.timeoutFor !== reaktor.timeoutMs) {
      clearTimeout(this.timeoutTimer)
      this.timeoutFor = reaktor.timeoutMs
      this.timeoutTimer = setTimeout(() => { if (this.current !== undefined) this.onTimeout(this.current) }, reaktor.timeoutMs)
    } else this.timeoutTimer.refresh()
    let result: unknown
    let error: unknown
    let thrown: { error: unknown } | undefined
    let failed = false
    try {
      this.aktor ??= reaktor.registration.createReaktor()
      // The signal and the child logger are built only when the aktor uses them (most runs never do).
      let log: SchedulerLogger | undefined
      const context = {
        get signal (): AbortSignal { return run.signal },
        get log (): SchedulerLogger { return (log ??= parentLog.child({ reaktorId, runId })) },
        settings: reaktor.app.settings,
        reaktorId,
        runId
      }
      // lastRun is the moment the aktor is called (what the aktor itself would see as its start).
      // runNow compares requests with this same reading, as the batched write compares them with
      // the stored lastRun: not with the one above, which a stall in between would leave behind.
      run.startedAt = this.lastStartedAt = now()
      this.opts.onRunStart(runId, run.startedAt)
      result = await this.aktor(undefined, context)
    } catch (err) {
      error = err
      thrown = { error: err }
      failed = true
    } finally {
      this.current = undefined
    }
    const endedAt = now()
    // Already recorded as failed (and blocked) at its timeout: only the block ends now.
    if (run.timedOut) { this.settleTimedOut(run, endedAt); return }
    // Stopped, released or fenced meanwhile: the result schedules (and records) nothing but history.
    if (this.halted) { this.opts.onAborted(runId, run.startedAt, endedAt - run.startedAt, describe(run.reason ?? new RunStoppedError('stopped'))); return }
    // Whatever the bookkeeping below does (a logger or an observer throwing), the next run is scheduled.
    let more = false
    try {
      if (!failed && run.reason !== undefined) {
        failed = true
        error = run.reason
      }
      if (!failed && typeof result !== 'boolean') {
        failed = true
        error = new TypeError(`run returned ${result === null ? 'null' : typeof result}; a polling reaktor must return a boolean`)
      }
      const outcome: RunOutcome = failed ? 'failed' : result === true ? 'more_work' : 'no_work'
      if (failed) this.failures++
      else this.failures = 0
      more = outcome === 'more_work'
      const lastError = failed ? describe(error) : null
      const record = this.writeRecord(run, more ? endedAt : endedAt + this.opts.effectiveIntervalMs, outcome, endedAt - run.startedAt, lastError, false)
      this.opts.onRunEnd(record, outcome, endedAt - run.startedAt, thrown)
      if (failed) {
        // A thrown non-Error (an object without a usable toString, say) is logged as its description.
        this.safeLog('warn', { err: error instanceof Error ? error : undefined, error: lastError, reaktorId, runId, consecutiveFailures: this.failures }, 'polling reaktor run failed')
      } else {
        parentLog.debug({ reaktorId, runId, result, ms: endedAt - run.startedAt }, 'polling reaktor run finished')
      }
    } finally {
      if (more) this.scheduleAt(endedAt)
      else this.scheduleInterval()
    }
  }

  /** Logging must never be what stops a reaktor (a serializer can throw on a hostile value). */
  private safeLog (level: 'warn' | 'error', obj: Record<string, unknown>, msg: string): void {
    try {
      this.opts.log[level](obj, msg)
    } catch {
      // Nothing left to report it with.
    }
  }
}

/** At most this much of an error's text is kept (`lastError`, one column of one row). */
const MAX_ERROR_TEXT = 2000

/**
 * The text of whatever a run threw, for `lastError`: total (never throws, whatever was thrown:
 * `Object.create(null)`, an object whose toString throws, a hostile Proxy), without NUL characters
 * (PostgreSQL text cannot hold them: the whole batch would be rejected) and at most 2000 characters.
 */
export function describe (err: unknown): string {
  let text: string
  try {
    text = err instanceof Error ? `${err.name}: ${err.message}` : `non-error thrown: ${String(err)}`
  } catch {
    let tag = '[object]'
    try {
      tag = Object.prototype.toString.call(err)
    } catch {
      // A Proxy can throw even here; the generic tag stays.
    }
    text = `non-error thrown: ${tag}`
  }
  text = text.replaceAll('\u0000', '')
  return text.length > MAX_ERROR_TEXT ? `${text.slice(0, MAX_ERROR_TEXT)}…` : text
}
