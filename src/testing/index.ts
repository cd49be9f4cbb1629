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
import pino from 'pino'
import { compileInputChecks } from '../apps/input-schema.js'
import { AktorCall, callFailure, invokeAktor, outputJson } from '../apps/invoke.js'
import { buildRegistry } from '../apps/registry.js'
import { resolveSettings } from '../apps/settings.js'
import type { AppRegistry } from '../apps/types.js'
import type { SchedulerLogger } from '../scheduler/logger.js'
import { describe, ReaktorRunner, RunStoppedError } from '../scheduler/reaktor-runner.js'
import type { AktorLogger, PollingReaktorRegistration, ReaktorRegistration } from '../sdk/types.js'

/** One line an aktor logged through `context.log`. */
export interface LogLine {
  level: keyof AktorLogger
  /** The message as pino writes it: placeholders (`%s`) filled in; an Error's message when one was logged alone. */
  msg: string | undefined
  /**
   * The context object's fields as they reach the service's log (JSON: an Error under `err` as
   * `{type, message, stack}`); undefined when only a message was given.
   */
  data: Record<string, unknown> | undefined
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
  /** The app, as registration errors name it (its package.json name and version). Default `app-under-test@0.0.0`. */
  app?: { name: string, version: string }
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

const UNNAMED_APP = { name: 'app-under-test', version: '0.0.0' }

/** The registration as the service registers it at start-up (same checks, same messages). */
function registry (options: RunOptions, pollingReaktors: PollingReaktorRegistration[], reaktors: ReaktorRegistration[]): AppRegistry {
  const { name, version } = options.app ?? UNNAMED_APP
  const settings = resolveSettings(`app ${name}`, name, options.settings ?? {}, {})
  const withTimeout = <R extends { timeout?: string }>(r: R): R => options.timeout === undefined ? r : { ...r, timeout: options.timeout }
  // The interval warning (below 3 s) concerns the schedule, which a single run does not have.
  return buildRegistry([{
    name,
    version,
    dir: undefined,
    publicDir: undefined,
    settings,
    pollingReaktors: pollingReaktors.map(withTimeout),
    reaktors: reaktors.map(withTimeout)
  }], { warn: () => {} })
}

const ignore = (): void => {}

/**
 * Records what the aktor logs through its child loggers, with a real pino writing to memory: the
 * calling conventions (`%s` placeholders, an Error alone, every level) are pino's own. The lines
 * the service writes about the run itself are not the app's, and are not recorded.
 */
function recorder (logs: LogLine[], onLog: RunOptions['onLog']): SchedulerLogger {
  const captured = (bindings: Record<string, unknown>): SchedulerLogger => {
    const log = pino({ level: 'trace', base: undefined, timestamp: false }, {
      write: (text: string) => {
        const { level, msg, ...fields } = JSON.parse(text) as { level: number, msg?: string } & Record<string, unknown>
        const line: LogLine = { level: pino.levels.labels[level] as LogLine['level'], msg, data: Object.keys(fields).length === 0 ? undefined : fields, bindings }
        logs.push(line)
        onLog?.(line)
      }
    })
    // A child's bindings are kept apart from the fields of each line, not merged into them as pino would.
    return Object.assign(log, { child: (more: Record<string, unknown>) => captured({ ...bindings, ...more }) })
  }
  return { trace: ignore, debug: ignore, info: ignore, warn: ignore, error: ignore, fatal: ignore, child: captured }
}

/** Catches what a test would otherwise see as a TypeError deep inside: `find()` matched nothing. */
function checkGiven (fn: string, registration: unknown): void {
  if (registration === undefined || registration === null) {
    throw new TypeError(`${fn}: the registration is ${String(registration)} (not found? a find() over the app's exports that matched no id gives undefined)`)
  }
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
  checkGiven('runPollingReaktor', registration)
  const registered = registry(options, [registration], []).pollingReaktors.get(registration.reaktorDefinitionId)!
  const logs: LogLine[] = []
  const { signal } = options
  if (signal?.aborted === true) throw abortedBeforeStart(signal, logs)

  return await new Promise((resolve, reject) => {
    let runId = ''
    // At once, as a stop answers at once: an aktor that ignores its signal settles in the background.
    const onAbort = (): void => {
      const reason = 'the signal given to runPollingReaktor was aborted'
      settle(reason)
      reject(new ReaktorRunError(describe(new RunStoppedError(reason)), 'aborted', logs, undefined, { cause: signal?.reason }))
    }
    // One run only: the runner is halted as soon as the run is judged, so nothing more is scheduled.
    const settle = (reason?: string): void => {
      signal?.removeEventListener('abort', onAbort)
      void runner.halt(reason)
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
      onRunEnd: (record, outcome, durationMs, thrown) => {
        settle()
        if (outcome !== 'failed') {
          resolve({ result: outcome === 'more_work', logs, runId, durationMs })
          return
        }
        // A run at its timeout threw nothing (yet): it has no cause.
        reject(new ReaktorRunError(record.lastError ?? 'failed', record.outcome === 'timed_out' ? 'timed_out' : 'failed', logs, undefined,
          thrown === undefined ? {} : { cause: thrown.error }))
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
  checkGiven('runAktor', registration)
  const { reaktors } = registry(options, [], [registration as ReaktorRegistration])
  const id = registration.reaktorDefinitionId
  const registered = reaktors.get(id)!
  const logs: LogLine[] = []
  // What the route's aktor gets is a request body: JSON, parsed afresh (the schema's defaults are
  // filled into it, never into the caller's object).
  const body = asJson(input, 'runAktor: the input cannot be sent as a JSON body')
  const problem = compileInputChecks(reaktors).get(id)?.(body)
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
    const output = await invokeAktor(registered, body, call, { reaktorId: id, runId, log: recorder(logs, options.onLog), response })
    // What the route answers: the output as JSON (undefined as null, a Date as its text, a Map as {}).
    return { output: JSON.parse(outputJson(output)) as O, logs, runId, durationMs: performance.now() - startedAt }
  } catch (err) {
    const failure = callFailure(call, err)
    throw new ReaktorRunError(failure.message ?? describe(err), failure.outcome, logs, failure.statusCode, { cause: failure.cause })
  } finally {
    signal?.removeEventListener('abort', onAbort)
  }
}

/** `value` as it arrives after a trip through JSON; undefined (no body) stays undefined. */
function asJson (value: unknown, what: string): unknown {
  let text: string | undefined
  try {
    text = JSON.stringify(value)
  } catch (err) {
    throw new TypeError(`${what}: ${(err as Error).message}`, { cause: err })
  }
  return text === undefined ? undefined : JSON.parse(text)
}
