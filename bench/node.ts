/**
 * A service node of the scheduler scenarios (4 to 7), in its own process: the whole service
 * (buildApp) with generated polling reaktors. It measures its own runs (no per-run IPC in the
 * throughput scenarios) and answers the bench over IPC.
 *
 * behaviours:
 * - `interval`: no-op aktor returning false; records every run's start for the gap statistics.
 * - `drain`:    no-op aktor returning true (back to back); counts runs.
 * - `probe`:    returns false; reports each run's start time to the bench (start → first run).
 * - `failover`: returns true after 5 ms; reports the first run of each take-over to the bench.
 * - `ledger`:   returns false after 20 ms; while watching, records every run (reaktor, wall-clock
 *               start and end) for the kill -9 scenario's overlap and failover analysis.
 *
 * With `published` (scenario 12) the node registers no reaktor of its own: they are a published
 * app's, whose code runs in this process and reports each run through the global RUN_HOOK, which
 * runs it as `ledger` does (20 ms, recorded while watching) and counts it by the app's version;
 * their phases are spread over the interval before the bench watches.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config.js'
import type { PollingReaktorRegistration } from '../src/sdk/types.js'
import { ADMIN, LEDGER_RUN_MS, reaktorId, RUN_HOOK } from './fixture.js'
import { fatal, RunWindow, serveParent, wallNow, type LedgerRun } from './lib.js'

export interface NodeOptions {
  databaseUrl: string
  dataDir: string
  nodeId: string
  reaktors: number
  interval: string
  intervalMs: number
  behaviour: 'interval' | 'drain' | 'probe' | 'failover' | 'ledger'
  autoStart: boolean
  /** false: this node never competes for ownership (it only forwards API calls). */
  compete: boolean
  listen: boolean
  /** RUN_HISTORY_PER_REAKTOR of the node (unset: the service's default). */
  historyPerReaktor?: number
  /** The `reaktors` are a published app's (ids reaktorId(i)), reporting their runs through RUN_HOOK. */
  published?: boolean
}

const opts = JSON.parse(process.argv[2]) as NodeOptions
const n = opts.reaktors

const runWindow = new RunWindow(n, opts.intervalMs)
/** Runs recorded while watching (ledger behaviour): [reaktor index, start, end] in wall-clock ms. */
let ledger: LedgerRun[] | undefined
const inFlight = new Map<number, number>()
/** Runs recorded while watching, by the version of the published app that made them. */
let byVersion = new Map<string, number>()
let flushAtBegin = { flushes: 0, rows: 0 }
/** The reaktors this node owned when the window began (indices). */
let ownedAtBegin = new Set<number>()

/** A run of the `ledger` behaviour: 20 ms, recorded (reaktor, start, end) while watching. */
async function ledgerRun (i: number): Promise<false> {
  const start = wallNow()
  runWindow.intervalRun(i)
  inFlight.set(i, start)
  await sleep(LEDGER_RUN_MS)
  inFlight.delete(i)
  ledger?.push([i, start, wallNow()])
  return false
}

// The published app's reaktors run here: the hook is how their runs reach the node's ledger.
if (opts.published === true) {
  const phased = new Set<number>()
  const global = globalThis as Record<symbol, unknown>
  global[Symbol.for(RUN_HOOK)] = async (i: number, version: string): Promise<false> => {
    // Before the bench watches, a reaktor's first run here waits i/n of an interval: the runs then
    // spread over the interval instead of coming in one burst, so a switch finds runs in flight.
    if (ledger === undefined && !phased.has(i)) {
      phased.add(i)
      await sleep(opts.intervalMs * i / n)
    }
    if (ledger !== undefined) byVersion.set(version, (byVersion.get(version) ?? 0) + 1)
    return await ledgerRun(i)
  }
}

function registration (i: number): PollingReaktorRegistration {
  const id = reaktorId(i)
  const base = { reaktorDefinitionId: id, interval: opts.interval, autoStart: opts.autoStart }
  switch (opts.behaviour) {
    case 'interval':
      return {
        ...base,
        createReaktor: () => () => {
          runWindow.intervalRun(i)
          return false
        }
      }
    case 'drain':
      return {
        ...base,
        createReaktor: () => () => {
          runWindow.drainRun()
          return true
        }
      }
    case 'probe':
      return {
        ...base,
        createReaktor: () => () => {
          process.send?.({ type: 'run', reaktorId: id, nodeId: opts.nodeId, at: wallNow() })
          return false
        }
      }
    case 'ledger':
      return { ...base, createReaktor: () => async () => await ledgerRun(i) }
    case 'failover':
      return {
        ...base,
        createReaktor: () => {
          // Called once per take-over: its first run is what failover waits for.
          let first = true
          return async () => {
            if (first) {
              first = false
              process.send?.({ type: 'run', reaktorId: id, nodeId: opts.nodeId, pid: process.pid, at: wallNow() })
            }
            await sleep(5)
            return true
          }
        }
      }
  }
}

try {
  const config = loadConfig({
    LOG_LEVEL: 'warn',
    DATA_DIR: opts.dataDir,
    REAKTOR_APPS_DIR: `${opts.dataDir}/no-apps`,
    NODE_ID: opts.nodeId,
    ADMIN_USERNAME: ADMIN.username,
    ADMIN_PASSWORD: ADMIN.password,
    ...(opts.historyPerReaktor === undefined ? {} : { RUN_HISTORY_PER_REAKTOR: String(opts.historyPerReaktor) })
  })
  const app = await buildApp({
    config,
    databaseUrl: opts.databaseUrl,
    apps: [{ name: 'bench-node', version: '1.0.0', pollingReaktors: opts.published === true ? [] : Array.from({ length: n }, (_, i) => registration(i)) }],
    scheduler: opts.compete ? undefined : { wantsOwnership: () => false },
    logger: true
  })
  const url = opts.listen ? await app.listen({ port: 0, host: '127.0.0.1' }) : undefined
  const index = new Map(Array.from({ length: n }, (_, i) => [reaktorId(i), i]))
  const ownedIndices = (): Set<number> => new Set(app.scheduler.ownedReaktorIds().map((id) => index.get(id) ?? -1))
  serveParent({
    stats: () => ({ everRan: runWindow.everRan, owned: app.scheduler.ownedCount, partitions: app.scheduler.heldPartitions().length }),
    begin: () => {
      flushAtBegin = app.scheduler.flushStats
      ownedAtBegin = ownedIndices()
      return runWindow.begin()
    },
    report: (msg) => {
      // A stall is judged only on what this node owned throughout the window: a reaktor that moved
      // to another node runs there. One that no node owns at the end the bench counts itself.
      const ownedNow = ownedIndices()
      // Ended first: its memory is the window's, before the forced collections below.
      const window = runWindow.end(Number(msg.lateMs ?? 0), (i) => ownedAtBegin.has(i) && ownedNow.has(i))
      // With --expose-gc (scenario 11): the live heap, without the garbage not yet collected.
      const gc = (globalThis as { gc?: () => void }).gc
      gc?.()
      gc?.()
      const live = gc === undefined ? undefined : process.memoryUsage()
      const flush = app.scheduler.flushStats
      return {
        ...window,
        liveHeap: live?.heapUsed ?? null,
        liveRss: live?.rss ?? null,
        flush,
        flushedInWindow: { flushes: flush.flushes - flushAtBegin.flushes, rows: flush.rows - flushAtBegin.rows },
        owned: app.scheduler.ownedCount,
        lockRefusals: app.scheduler.lockRefusals,
        problem: app.scheduler.problem ?? null
      }
    },
    watch: () => {
      ledger = []
      byVersion = new Map()
      return { at: wallNow() }
    },
    /** The ledger so far, the runs in flight (no end yet, `at` now), and the reaktors this node owns. */
    ledger: () => ({
      at: wallNow(),
      runs: ledger ?? [],
      inFlight: [...inFlight],
      byVersion: Object.fromEntries(byVersion),
      owned: app.scheduler.ownedReaktorIds().map((id) => index.get(id))
    }),
    /** The process's memory after two full collections when the node runs with --expose-gc (`gc` says whether). */
    memory: () => {
      const gc = (globalThis as { gc?: () => void }).gc
      gc?.()
      gc?.()
      const { rss, heapUsed } = process.memoryUsage()
      return { rss, heapUsed, gc: gc !== undefined }
    }
  }, async () => { await app.close() })
  process.send?.({ type: 'ready', url, pid: process.pid })
} catch (err) {
  fatal(err)
}
