/** What every aktor receives besides its input. Combinators pass it through unchanged. */
export interface AktorContext {
  /** Aborted when the run is stopped, times out, or the HTTP client goes away. */
  signal: AbortSignal
  /** A pino-style child logger bound to the reaktor and run. */
  log: AktorLogger
  /** The settings of the app the aktor belongs to (package.json `reaktor.settings` + env overrides). */
  settings: Readonly<Record<string, unknown>>
  reaktorId: string
  runId: string
}

/**
 * One level of the logger, called as pino is: `(obj, msg?, ...args)` or `(msg, ...args)`, `msg`
 * with printf-style `%s %d %o` placeholders for `args`; an Error as `obj` gives the message.
 */
export type AktorLogFn = (obj: unknown, msg?: string, ...args: unknown[]) => void

/** The service's logger is pino: every one of its levels is there. */
export interface AktorLogger {
  trace: AktorLogFn
  debug: AktorLogFn
  info: AktorLogFn
  warn: AktorLogFn
  error: AktorLogFn
  fatal: AktorLogFn
}

/** An aktor is a function of input and context. A plain async function is an aktor. */
export type Aktor<I = unknown, O = unknown> = (input: I, context: AktorContext) => O | Promise<O>

/** An aktor that always answers with a promise: what branch, pipe and parallel return. */
export type AsyncAktor<I = unknown, O = unknown> = (input: I, context: AktorContext) => Promise<O>

/** Any aktor, whatever its input and output. */
export type AnyAktor = Aktor<any, any>

/** The input type an aktor accepts (`unknown` for an aktor that ignores its input). */
export type AktorInput<A> = A extends (input: infer I, ...rest: any[]) => unknown ? I : never

/** The (awaited) output type of an aktor. */
export type AktorOutput<A> = A extends (...args: any[]) => infer O ? Awaited<O> : never

/**
 * A polling reaktor's aktor: it gets no input, and its boolean result decides whether the next
 * run is immediate (`true`: more work) or one interval later (`false`).
 */
export type PollingAktor = Aktor<void, boolean>

/** A polling reaktor registration. */
export interface PollingReaktorRegistration {
  /** Unique across all apps; the `{reaktorId}` of `/api/v1/polling/{reaktorId}/…`. */
  reaktorDefinitionId: string
  /** Integer + unit (`ms`, `s`, `m`, `h`, `d`); runs at least 3 s apart. */
  interval: string
  /** Start on server start-up (default false). */
  autoStart?: boolean
  label?: string
  description?: string
  /** Longest a run may take before its signal is aborted and it counts as failed (default `5m`). */
  timeout?: string
  /** Returns the aktor that each run calls. Settings reach it through `context.settings`. */
  createReaktor: () => PollingAktor
}

/** A standard reaktor, called through `POST /api/v1/aktor/{reaktorDefinitionId}`. */
export interface ReaktorRegistration<I = any, O = unknown> {
  reaktorDefinitionId: string
  label?: string
  description?: string
  /** Optional JSON Schema (TypeBox works) the request body must satisfy; else 400. */
  inputSchema?: object
  /** Longest a call may take before it is aborted and answered 504 (default `30s`). */
  timeout?: string
  createReaktor: (params: ReaktorParams) => Aktor<I, O>
}

export interface ReaktorParams {
  /** The app's settings (package.json `reaktor.settings` + environment overrides). */
  settings: Readonly<Record<string, unknown>>
}

/** What an app's entry module exports (default export or named exports). Either may be absent. */
export interface ReaktorAppModule {
  pollingReaktors?: PollingReaktorRegistration[]
  reaktors?: ReaktorRegistration[]
}
