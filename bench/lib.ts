/**
 * Shared pieces of the benchmark: child processes driven over IPC, statistics, tables.
 *
 * Every process under test (service nodes, bare servers, the job queues of scenario 10, the load
 * generator) is a child of bench/run.ts, so no two of them share an event loop.
 */
import { fork, type ChildProcess } from 'node:child_process'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { pinned } from './load.js'

export const BENCH_DIR = import.meta.dirname
export const ROOT = path.resolve(BENCH_DIR, '..')

/** Wall-clock milliseconds with sub-millisecond resolution, comparable across processes. */
export function wallNow (): number {
  return performance.timeOrigin + performance.now()
}

export async function delay (ms: number): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms))
}

/** A message between run.ts and a child. Requests carry `id`; the child's reply carries the same. */
export interface Message {
  type: string
  id?: number
  [key: string]: unknown
}

export interface ChildHandle {
  proc: ChildProcess
  name: string
  /** The child's `ready` message. */
  ready: Promise<Message>
  /** Sends a request and resolves with the reply (bounded by `timeoutMs`). */
  request: (msg: Message, timeoutMs?: number) => Promise<Message>
  /** Every unsolicited message (`type` other than `ready`/`reply`). */
  onEvent: (fn: (msg: Message) => void) => void
  exited: Promise<number | null>
  /** Asks the child to shut down cleanly (so a --cpu-prof profile is written), then kills it if it hangs. */
  shutdown: (timeoutMs?: number) => Promise<void>
}

export interface ForkOptions {
  env?: Record<string, string>
  /** Extra node flags (e.g. --cpu-prof). */
  execArgv?: string[]
  /** Upper bound for the ready message. */
  readyTimeoutMs?: number
  /** Pipe the child's stdout here instead of inheriting it. */
  stdout?: 'inherit' | 'ignore' | 'pipe'
  /** The core the child runs on (taskset), from its start: a server under test. */
  core?: number
}

/** Forks a TypeScript child (through tsx, like this process) that talks over IPC. */
export function forkChild (name: string, script: string, args: string[], opts: ForkOptions = {}): ChildHandle {
  const nodeArgs = ['--import', 'tsx', ...(opts.execArgv ?? [])]
  // Pinned, node runs under taskset: taskset execs it, so the IPC channel and the pid stay node's.
  const [execPath, execArgv] = opts.core === undefined ? [process.execPath, nodeArgs] : pinned(opts.core, process.execPath, nodeArgs)
  const proc = fork(path.join(BENCH_DIR, script), args, {
    cwd: ROOT,
    execPath,
    execArgv,
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', opts.stdout ?? 'inherit', 'inherit', 'ipc']
  })
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)))
  const pending = new Map<number, { resolve: (m: Message) => void, reject: (e: Error) => void }>()
  const listeners: Array<(m: Message) => void> = []
  let nextId = 1
  let resolveReady!: (m: Message) => void
  let rejectReady!: (e: Error) => void
  const ready = new Promise<Message>((resolve, reject) => { resolveReady = resolve; rejectReady = reject })
  ready.catch(() => {})
  const readyTimer = setTimeout(() => rejectReady(new Error(`${name}: not ready within ${opts.readyTimeoutMs ?? 120_000} ms`)), opts.readyTimeoutMs ?? 120_000)
  proc.on('message', (raw) => {
    const msg = raw as Message
    if (msg.type === 'ready') { clearTimeout(readyTimer); resolveReady(msg); return }
    if (msg.type === 'reply' && msg.id !== undefined) {
      pending.get(msg.id)?.resolve(msg)
      pending.delete(msg.id)
      return
    }
    if (msg.type === 'fatal') { clearTimeout(readyTimer); rejectReady(new Error(`${name}: ${String(msg.error)}`)); return }
    for (const fn of listeners) fn(msg)
  })
  void exited.then((code) => {
    clearTimeout(readyTimer)
    rejectReady(new Error(`${name} exited (${code}) before it was ready`))
    for (const p of pending.values()) p.reject(new Error(`${name} exited (${code})`))
    pending.clear()
  })
  const request = async (msg: Message, timeoutMs = 60_000): Promise<Message> => {
    const id = nextId++
    return await new Promise<Message>((resolve, reject) => {
      const timer = setTimeout(() => { pending.delete(id); reject(new Error(`${name}: no reply to ${msg.type} within ${timeoutMs} ms`)) }, timeoutMs)
      pending.set(id, {
        resolve: (m) => { clearTimeout(timer); resolve(m) },
        reject: (e) => { clearTimeout(timer); reject(e) }
      })
      proc.send({ ...msg, id })
    })
  }
  const shutdown = async (timeoutMs = 20_000): Promise<void> => {
    if (proc.exitCode !== null || proc.signalCode !== null) return
    if (proc.connected) proc.send({ type: 'shutdown' })
    const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs)
    await exited
    clearTimeout(timer)
  }
  return { proc, name, ready, request, onEvent: (fn) => listeners.push(fn), exited, shutdown }
}

/**
 * The child side: `handlers[type]` answers requests; `shutdown` runs `close` then exits 0.
 * Replies are `{type:'reply', id, ...result}`.
 */
export function serveParent (handlers: Record<string, (msg: Message) => unknown>, close: () => Promise<void>): void {
  process.on('message', (raw) => {
    const msg = raw as Message
    if (msg.type === 'shutdown') {
      void close().finally(() => process.exit(0))
      return
    }
    const handler = handlers[msg.type]
    void (async () => {
      try {
        const result = handler === undefined ? { error: `unknown request ${msg.type}` } : await handler(msg)
        process.send?.(JSON.parse(JSON.stringify({ ...(result as object), type: 'reply', id: msg.id }, keepNonFinite)))
      } catch (err) {
        process.send?.({ type: 'reply', id: msg.id, error: (err as Error).message })
      }
    })()
  })
  // The parent went away (bench interrupted): never linger.
  process.on('disconnect', () => { void close().finally(() => process.exit(0)) })
}

/** Reports a start-up failure to the parent and exits. */
export function fatal (err: unknown): never {
  process.send?.({ type: 'fatal', error: (err as Error).stack ?? String(err) })
  process.exit(1)
}

/**
 * A JSON replacer keeping Infinity and NaN as strings (JSON would make both null): an infinite gap
 * (a reaktor that did not run again) must not read as "no gaps". `num` reads them back.
 */
export function keepNonFinite (_key: string, value: unknown): unknown {
  return typeof value === 'number' && !Number.isFinite(value) ? String(value) : value
}

/** A number sent over IPC or read from a results JSON: null (no value) is NaN, "Infinity" is Infinity. */
export function num (value: unknown): number {
  return value === null || value === undefined ? NaN : Number(value)
}

// ------------------------------------------------------------------ statistics

export function percentile (values: readonly number[], p: number): number {
  if (values.length === 0) return NaN
  // Not a - b: Infinity - Infinity is NaN, which would leave the order undefined.
  const sorted = [...values].sort((a, b) => a < b ? -1 : a > b ? 1 : 0)
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[rank]
}

export function median (values: readonly number[]): number {
  return percentile(values, 50)
}

/** The sum of `pick` over the items (of the items themselves when they are numbers). */
export function sum<T> (items: readonly T[], pick: (item: T) => number = Number): number {
  let total = 0
  for (const item of items) total += pick(item)
  return total
}

export function mean (values: readonly number[]): number {
  return values.length === 0 ? NaN : values.reduce((a, b) => a + b, 0) / values.length
}

export function round (value: number, digits = 1): number {
  if (!Number.isFinite(value)) return value
  const f = 10 ** digits
  return Math.round(value * f) / f
}

// ------------------------------------------------------------------ output

export type Row = Record<string, string | number | boolean | null>

/** A plain aligned text table (what a terminal and a Markdown file both render readably). */
export function formatTable (title: string, rows: readonly Row[]): string {
  if (rows.length === 0) return `${title}\n  (no rows)\n`
  const columns = [...new Set(rows.flatMap((r) => Object.keys(r)))]
  const cell = (v: unknown): string => v === undefined || v === null ? '' : typeof v === 'number' ? v.toLocaleString('en-US', { maximumFractionDigits: 2 }) : String(v)
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)))
  const line = (values: string[]): string => `| ${values.map((v, i) => v.padEnd(widths[i])).join(' | ')} |`
  return [
    title,
    line(columns),
    `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`,
    ...rows.map((r) => line(columns.map((c) => cell(r[c]))))
  ].join('\n') + '\n'
}

/**
 * What scenarios 4 and 5 measure inside the process that runs the reaktors (ours, or a job
 * queue's): run starts, gaps between runs of one reaktor, and the runs of a window.
 */
export class RunWindow {
  private readonly lastStart: Float64Array
  private lastAtBegin = new Float64Array(0)
  private beganAt = 0
  private measuring = false
  private runs = 0
  private gaps: number[] = []
  private cpuAtBegin = process.cpuUsage()
  /** Reaktors that ran at least once (1 for the back-to-back scenario). */
  everRan = 0

  constructor (reaktors: number, private readonly intervalMs: number) {
    this.lastStart = new Float64Array(reaktors)
  }

  /** Reaktor `i` started an interval-paced run now (or at `t`, on the clock of the other calls). */
  intervalRun (i: number, t = performance.now()): void {
    const previous = this.lastStart[i]
    if (previous === 0) this.everRan++
    else if (this.measuring) this.gaps.push(t - previous - this.intervalMs)
    if (this.measuring) this.runs++
    this.lastStart[i] = t
  }

  /** The back-to-back reaktor ran. */
  drainRun (): void {
    if (this.measuring) this.runs++
    this.everRan = 1
  }

  begin (at = performance.now()): { at: number } {
    this.runs = 0
    this.gaps = []
    this.measuring = true
    this.lastAtBegin = Float64Array.from(this.lastStart)
    this.cpuAtBegin = process.cpuUsage()
    this.beganAt = at
    return { at: this.beganAt }
  }

  /**
   * The window's runs and gaps, and the process's CPU time in it and its memory at its end.
   *
   * A reaktor `considered` here (one this process should have run throughout the window) whose
   * last start was, by the window's end, more than an interval plus `lateMs` ago (or that never
   * ran) did not run again: it counts as an infinite gap in the gap statistics and in `stalled`,
   * whether it ran earlier in the window or not. Counting only the gaps of the reaktors that ran
   * again would let a stall pass unseen: a gap is recorded only when the next run starts.
   */
  end (lateMs = 0, considered: (i: number) => boolean = () => true, at = performance.now()): { runs: number, gapCount: number, stalled: number, gapP50: number, gapP99: number, gapMax: number, cycles: number, at: number, cpuMs: number, rss: number, heapUsed: number } {
    this.measuring = false
    const stalled = this.stalled(at, lateMs, considered)
    const gaps = stalled === 0 ? this.gaps : [...this.gaps, ...new Array<number>(stalled).fill(Infinity)]
    const cpu = process.cpuUsage(this.cpuAtBegin)
    const mem = process.memoryUsage()
    return {
      cpuMs: (cpu.user + cpu.system) / 1000,
      rss: mem.rss,
      heapUsed: mem.heapUsed,
      runs: this.runs,
      gapCount: this.gaps.length,
      stalled,
      gapP50: percentile(gaps, 50),
      gapP99: percentile(gaps, 99),
      gapMax: gaps.length === 0 ? NaN : gaps.reduce((a, b) => Math.max(a, b), -Infinity),
      cycles: this.cycles(at),
      at
    }
  }

  private stalled (endAt: number, lateMs: number, considered: (i: number) => boolean): number {
    if (this.intervalMs <= 0) return 0
    let count = 0
    for (let i = 0; i < this.lastStart.length; i++) {
      // lastStart 0: never ran in this process, so the difference is past any bound.
      if (endAt - this.lastStart[i] > this.intervalMs + lateMs && considered(i)) count++
    }
    return count
  }

  /**
   * Runs in the window, counted in fractions of an interval: plus the part of an interval each
   * reaktor has waited since its last run at the end, minus the same at the start. A plain count
   * jumps by a whole burst when the window edge falls inside one (all reaktors start together, so
   * their runs come in bursts); this does not, and a reaktor that stopped running still counts 0.
   */
  private cycles (endAt: number): number {
    let sum = this.runs
    if (this.intervalMs <= 0) return sum
    for (let i = 0; i < this.lastStart.length; i++) {
      sum += Math.min(1, (endAt - this.lastStart[i]) / this.intervalMs) - Math.min(1, (this.beganAt - this.lastAtBegin[i]) / this.intervalMs)
    }
    return sum
  }
}

/** A recorded run (the `ledger` behaviour of bench/node.ts): reaktor index, wall-clock start and end in ms. */
export type LedgerRun = [number, number, number]

/** The runs of each reaktor, in the order they started. */
export function runsByReaktor (runs: Iterable<LedgerRun>): Map<number, LedgerRun[]> {
  const byReaktor = new Map<number, LedgerRun[]>()
  for (const run of runs) {
    const list = byReaktor.get(run[0])
    if (list === undefined) byReaktor.set(run[0], [run])
    else list.push(run)
  }
  for (const list of byReaktor.values()) list.sort((a, b) => a[1] - b[1])
  return byReaktor
}

/** Runs of a reaktor that started before its previous run ended: what the partition locks rule out. */
export function countOverlaps (byReaktor: ReadonlyMap<number, readonly LedgerRun[]>): number {
  let overlaps = 0
  for (const list of byReaktor.values()) {
    for (let i = 1; i < list.length; i++) if (list[i][1] < list[i - 1][2]) overlaps++
  }
  return overlaps
}

/**
 * The window `from`–`to` (wall-clock) of recorded runs of every node, measured as one node's
 * RunWindow measures its own: the runs before `from` give each reaktor its last start, the runs
 * after `to` are left out, and a reaktor that no node ran within its interval and `lateMs` before
 * `to` did not run again. For a window in which reaktors may change node, where each node's own
 * window would read a move as a gap, or as a stall.
 */
export function windowOfRuns (runs: readonly LedgerRun[], reaktors: number, intervalMs: number, from: number, to: number, lateMs: number): ReturnType<RunWindow['end']> {
  const window = new RunWindow(reaktors, intervalMs)
  const starts = runs.filter((r) => r[1] <= to).sort((a, b) => a[1] - b[1])
  let k = 0
  for (; k < starts.length && starts[k][1] < from; k++) window.intervalRun(starts[k][0], starts[k][1])
  window.begin(from)
  for (; k < starts.length; k++) window.intervalRun(starts[k][0], starts[k][1])
  return window.end(lateMs, () => true, to)
}

/** A small per-run figure to 3 significant digits (the tables' own format keeps 2 decimals). */
export function sig (value: number): string {
  return value.toLocaleString('en-US', { maximumSignificantDigits: 3 })
}
