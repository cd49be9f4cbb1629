/**
 * `reaktor-service/testing`: runs one registration of an app once, as the service would run it, so
 * that an app's tests need no running service, no database and no HTTP. The run goes through the
 * service's own code: the registry checks the registration (the start-up messages), the settings
 * are frozen as the loader freezes them, a polling run is timed and judged by the scheduler's
 * runner (a non-boolean result fails, `timeout` aborts the signal), and an aktor call is checked
 * against its `inputSchema` and made by the aktor route's invoker (its timeout and status codes).
 */
import { randomUUID } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { performance } from 'node:perf_hooks'
import { compileInputChecks } from '../apps/input-schema.js'
import { AktorCall, ClientClosed, clientError, invokeAktor } from '../apps/invoke.js'
import { buildRegistry } from '../apps/registry.js'
import { resolveSettings } from '../apps/settings.js'
import type { AppRegistry } from '../apps/types.js'
import { aktorTimeout, Errors } from '../errors.js'
import type { SchedulerLogger } from '../scheduler/logger.js'
import { describe, ReaktorRunner } from '../scheduler/runner.js'
import type { PollingAktor, PollingReaktorRegistration, ReaktorRegistration } from './types.js'

/** One line an aktor logged through `context.log`. */
export interface LogLine {
  level: 'debug' | 'info' | 'warn' | 'error'
  /** The message: the second argument, or the first when it was a string alone. */
  msg: string | undefined
  /** The context object (pino's first argument); undefined when only a message was given. */
  data: unknown
  /** What the service binds to the run's logger: `reaktorId` and `runId` (polling) or `aktor` (a call). */
  bindings: Record<string, unknown>
}

export interface RunOptions {
  /** The app's settings as the aktor sees them: read-only at every depth, as in the service. Default `{}`. */
  settings?: Record<string, unknown>
  /**
   * Aborting it interrupts the run as the service would: a polling run as by a stop, an aktor call
   * as by the HTTP client going away. Already aborted: nothing runs.
   */
  signal?: AbortSignal
  /** Overrides the registration's `timeout` (`100ms`, `5s`): after it the run's signal is aborted and it fails. */
  timeout?: string
  /** Sees each log line as it is written (`onLog: console.log` while debugging). */
  onLog?: (line: LogLine) => void
}

export interface PollingRunResult {
  /** The run's answer: `true` more work (the service runs it again at once), `false` none. */
  result: boolean
  logs: LogLine[]
  runId: string
  durationMs: number
}

export interface AktorRunResult<O> {
  /** What the aktor returned (`POST /api/v1/aktor/{id}` answers it as JSON). */
  output: O
  logs: LogLine[]
  runId: string
  durationMs: number
}

/** How a run that did not succeed ended: the outcomes of the service's run history. */
export type FailedOutcome = 'failed' | 'timed_out' | 'aborted'

/**
 * A run that failed, timed out or was aborted. The message is what the service records or
 * answers; `cause` is what the aktor threw, when it threw.
 */
export class ReaktorRunError extends Error {
  readonly code = 'REAKTOR_RUN_FAILED'
  constructor (
    message: string,
    readonly outcome: FailedOutcome,
    /** The lines the aktor logged before it failed. */
    readonly logs: LogLine[],
    /** An aktor call's HTTP status: 400 input, 4xx thrown by the aktor, 499 aborted, 500 failed, 504 timed out. Undefined for a polling run. */
    readonly statusCode?: number,
    options?: { cause?: unknown }
  ) {
    super(message, options)
    this.name = 'ReaktorRunError'
  }
}

const APP_NAME = 'app-under-test'

/** The registration as the service registers it at start-up (same checks, same messages). */
function registry (options: RunOptions, pollingReaktors: PollingReaktorRegistration[], reaktors: ReaktorRegistration[]): AppRegistry {
  const label = `app ${APP_NAME}`
  const settings = resolveSettings(label, APP_NAME, options.settings ?? {}, {})
  const withTimeout = <R extends { timeout?: string }>(r: R): R => options.timeout === undefined ? r : { ...r, timeout: options.timeout }
  // The interval warning (below 3 s) concerns the schedule, which a single run does not have.
  return buildRegistry([{
    name: APP_NAME,
    version: '0.0.0',
    dir: undefined,
    publicDir: undefined,
    settings,
    pollingReaktors: pollingReaktors.map(withTimeout),
    reaktors: reaktors.map(withTimeout)
  }], { warn: () => {} })
}

/** Records what the aktor logs (its child loggers); the lines the service writes about the run itself are not the app's. */
function recorder (logs: LogLine[], onLog: RunOptions['onLog'], bindings?: Record<string, unknown>): SchedulerLogger {
  const at = (level: LogLine['level']) => (obj: unknown, msg?: string): void => {
    if (bindings === undefined) return
    const line: LogLine = typeof obj === 'string' && msg === undefined
      ? { level, msg: obj, data: undefined, bindings }
      : { level, msg, data: obj, bindings }
    logs.push(line)
    onLog?.(line)
  }
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error'), child: (more) => recorder(logs, onLog, { ...bindings, ...more }) }
}

function abortedBeforeStart (signal: AbortSignal, logs: LogLine[], statusCode?: number): ReaktorRunError {
  return new ReaktorRunError(`not run: the signal was aborted before the start (${describe(signal.reason)})`, 'aborted', logs, statusCode, { cause: signal.reason })
}

/**
 * Runs a polling reaktor once, as one run of the service's scheduler: `createReaktor()`, then its
 * aktor with no input and a context of `signal`, `log`, `settings`, `reaktorId` and `runId`.
 * Resolves with its boolean; rejects with a ReaktorRunError when it throws, returns anything but a
 * boolean, outlives `timeout` (the registration's, default `5m`) or `options.signal` aborts it.
 */
export async function runPollingReaktor (registration: PollingReaktorRegistration, options: RunOptions = {}): Promise<PollingRunResult> {
  const checked = registry(options, [registration], []).pollingReaktors.get(registration.reaktorDefinitionId)!
  // What the aktor threw, for `cause`: the runner keeps only its description.
  let thrown: { error: unknown } | undefined
  const keep = (error: unknown): never => {
    thrown = { error }
    throw error
  }
  const observed: PollingReaktorRegistration = {
    ...checked.registration,
    createReaktor: () => {
      let aktor: PollingAktor
      try {
        aktor = checked.registration.createReaktor()
      } catch (err) {
        return keep(err)
      }
      return async (input, context) => {
        try {
          return await aktor(input, context)
        } catch (err) {
          return keep(err)
        }
      }
    }
  }
  const registered = { ...checked, registration: observed }
  const logs: LogLine[] = []
  const { signal } = options
  if (signal?.aborted === true) throw abortedBeforeStart(signal, logs)

  return await new Promise((resolve, reject) => {
    let runId = ''
    const onAbort = (): void => { void runner.halt('the signal given to runPollingReaktor was aborted') }
    // One run only: the runner is halted as soon as the run is judged, so nothing more is scheduled.
    const settle = (): void => {
      signal?.removeEventListener('abort', onAbort)
      void runner.halt()
    }
    const runner = new ReaktorRunner({
      reaktorId: registration.reaktorDefinitionId,
      reaktor: registered,
      effectiveIntervalMs: registered.intervalMs,
      version: '0',
      consecutiveFailures: 0,
      partition: 0,
      generation: '0',
      log: recorder(logs, options.onLog),
      now: Date.now,
      mayRun: () => true,
      onRunStart: (id) => { runId = id },
      onRunEnd: (record, outcome, durationMs) => {
        settle()
        if (outcome !== 'failed') {
          resolve({ result: outcome === 'more_work', logs, runId, durationMs })
          return
        }
        const timedOut = record.outcome === 'timed_out'
        reject(new ReaktorRunError(record.lastError ?? 'failed', timedOut ? 'timed_out' : 'failed', logs, undefined,
          thrown === undefined || timedOut ? {} : { cause: thrown.error }))
      },
      onRecord: () => {},
      onAborted: (_runId, _startedAt, _durationMs, error) => {
        settle()
        reject(new ReaktorRunError(error, 'aborted', logs))
      }
    })
    signal?.addEventListener('abort', onAbort, { once: true })
    runner.start(null)
  })
}

/**
 * Calls a standard reaktor once, as `POST /api/v1/aktor/{reaktorDefinitionId}` would: the input
 * is checked against `inputSchema` (defaults filled in), then `createReaktor({ settings })` and its
 * aktor run with a context of `signal`, `log`, `settings`, `reaktorId` and `runId`. Resolves with
 * the output; rejects with a ReaktorRunError whose `statusCode` is the HTTP status the service
 * would answer with (400, the aktor's own 4xx, 499, 500 or 504).
 */
export async function runAktor<I, O> (registration: ReaktorRegistration<I, O>, input: I, options: RunOptions = {}): Promise<AktorRunResult<O>> {
  const { reaktors } = registry(options, [], [registration as ReaktorRegistration])
  const id = registration.reaktorDefinitionId
  const registered = reaktors.get(id)!
  const logs: LogLine[] = []
  const problem = compileInputChecks(reaktors).get(id)?.(input)
  if (problem !== undefined) throw new ReaktorRunError(problem, 'failed', logs, 400)
  const { signal } = options
  if (signal?.aborted === true) throw abortedBeforeStart(signal, logs, 499)

  // The service interrupts a call whose client went away when its response closes unfinished.
  const response = Object.assign(new EventEmitter(), { writableFinished: false })
  const onAbort = (): void => { response.emit('close') }
  signal?.addEventListener('abort', onAbort, { once: true })
  const call = new AktorCall()
  const runId = randomUUID()
  const startedAt = performance.now()
  try {
    const output = await invokeAktor(registered, input, call, { reaktorId: id, runId, log: recorder(logs, options.onLog), response, timeoutReason: aktorTimeout })
    return { output: output as O, logs, runId, durationMs: performance.now() - startedAt }
  } catch (err) {
    const reason = call.reason
    if (reason instanceof Errors.AktorTimeout) throw new ReaktorRunError(reason.message, 'timed_out', logs, 504, { cause: reason })
    if (reason instanceof ClientClosed) throw new ReaktorRunError(reason.message, 'aborted', logs, 499, { cause: reason })
    const client = clientError(err)
    throw new ReaktorRunError(client?.message ?? describe(err), 'failed', logs, client?.statusCode ?? 500, { cause: err })
  } finally {
    signal?.removeEventListener('abort', onAbort)
  }
}
