import type { Kysely } from 'kysely'
import { MIN_POLLING_INTERVAL_MS } from '../apps/registry.js'
import type { RegisteredPollingReaktor } from '../apps/types.js'
import type { AuditWriter } from '../audit/record.js'
import { DEAD_AFTER_MS, PING_EVERY_MS } from '../db/dedicated-connection.js'
import type { Database } from '../db/schema.js'
import type { SchedulerLogger } from './logger.js'
import type { RunOutcome } from './reaktor-runner.js'

/** The scheduler's options, their defaults, and the errors it hands out. */

export interface SchedulerOptions {
  /** Kysely on the shared pool: state reads/writes and the batched run results. */
  db: Kysely<Database>
  /**
   * For the boot rules, which touch every registered row in one transaction: a handle without the
   * pool's statement bounds (at 100,000 reaktors, with nodes booting at once and waiting on each
   * other's rows, that can take longer). Default: `db`.
   */
  bulkDb?: Kysely<Database>
  /** For the scheduler's own dedicated connection (advisory locks + LISTEN); never pooled. */
  databaseUrl: string
  /**
   * The polling reaktors registered in THIS node's code; a node only ever runs these. The map may
   * change while the scheduler runs (an app version switch): the caller then tells it through
   * `registrationsChanged`.
   */
  reaktors: ReadonlyMap<string, RegisteredPollingReaktor>
  /**
   * The ids this node tells the others it registers, for ownership: a partition with running
   * reaktors some node does not advertise goes to a node that does. Default: every id of
   * `reaktors`. A node that runs an older version of an app than the active one leaves that app's
   * ids out, so that the nodes running the active version are preferred.
   */
  advertisedIds?: () => Iterable<string>
  nodeId: string
  log: SchedulerLogger
  /**
   * The partition count this node expects (PARTITIONS). Unset: whatever the cluster's database
   * stores (the default, 256, on a new one). A node whose count differs from the stored one refuses to start.
   */
  partitions?: number
  /** How long stop() waits for in-flight runs after aborting their signals. Default 10 s. */
  shutdownGraceMs?: number
  /** Floor of every interval (3 s). Tests lower it. */
  minIntervalMs?: number
  /** Wall clock (epoch ms) for the persisted timestamps and the due-time arithmetic. */
  now?: () => number
  /** Fallback ownership reconcile + lock-connection ping period. Default 1 s. */
  reconcileIntervalMs?: number
  /** Run results are flushed at most this often, in one statement. Default 200 ms. */
  flushIntervalMs?: number
  /** A run starts without a fresh ping when the lock connection answered within this. Default 2 s. */
  lockCheckMaxAgeMs?: number
  /**
   * A lock-connection statement slower than this counts as a dead connection (network cut): the
   * node fences itself. Must stay well below the server-side keepalive bound (see LockConnection),
   * so the node has stopped its runs before PostgreSQL drops its session. Default 5 s.
   */
  lockQueryTimeoutMs?: number
  /** Reconnect backoff of the lock connection, doubled per failure, ±20 % jitter. Default 250 ms … 5 s. */
  reconnectMinMs?: number
  reconnectMaxMs?: number
  /**
   * A partition that no node has held for this long is taken by any node, even beyond its fair
   * share (liveness before balance). Default 3 s.
   */
  orphanGraceMs?: number
  /**
   * A partition taken from a session that ended without releasing it (a crash, a terminated or
   * lost lock connection): its runs start no earlier than this long after this node first saw it
   * free. PostgreSQL frees the locks the moment the session ends, but a previous holder that is
   * still alive hears of it only when its socket reports the end, and aborts its runs then
   * (1–21 ms when measured, up to 95 ms on two cores busy with two cluster suites). Default 200 ms:
   * twice that worst case, well within the about 1 s a takeover after a crash takes anyway.
   */
  fencingGraceMs?: number
  /** Every held partition's running rows are compared with its runners about this often (the fallback for a lost notification). Default 30 s. */
  rowsCheckMs?: number
  /** After PostgreSQL refused a lock (full lock table), no new lock is tried for this long, doubling up to 60 s. Default 1 s. */
  lockRefusalBackoffMs?: number
  /**
   * Ownership policy hook, asked before competing for a free partition, on top of the built-in
   * even spreading; default: always. A node that declines simply leaves the lock to another node;
   * correctness never depends on this answer, only on the advisory lock.
   */
  wantsOwnership?: (partition: number) => boolean
  /** History rows kept per reaktor (RUN_HISTORY_PER_REAKTOR); 0: no history is written. Default 100. */
  runHistoryPerReaktor?: number
  /** Stores the audit row of the restart-time reset (the audit table); unset: its log line only. */
  auditWriter?: AuditWriter
  /** Told of every finished run on this node (metrics). Must not throw; a throw is ignored. */
  onRunEnd?: (run: RunEnd) => void
  /**
   * At boot, when no node holds the membership lock but partitions with running reaktors still
   * name other nodes (those nodes did not shut down cleanly: crashed, or only disconnected by a
   * database restart), wait up to this long for one of them to reconnect before calling it a cold
   * start. Default 6 s: the reconnect backoff's ceiling (5 s + 20 % jitter).
   */
  coldStartSettleMs?: number
  /** Tests only: awaited before a runner starts, to widen the race windows of a takeover on purpose. */
  reconcileHook?: (step: 'locked' | 'claimed', reaktorIds: readonly string[]) => void | Promise<void>
}

/** One finished run, as the `onRunEnd` observer sees it. */
export interface RunEnd {
  reaktorId: string
  outcome: RunOutcome
  durationMs: number
}

/** Start, stop or status of an id no app on this node registered: the API's 404. */
export class UnknownReaktorError extends Error {
  readonly code = 'REAKTOR_NOT_FOUND'
  constructor (public readonly reaktorId: string) {
    super(`Polling reaktor "${reaktorId}" is not registered`)
    this.name = 'UnknownReaktorError'
  }
}

/** A node of the previous version (one lock per reaktor) shares the database: never run side by side. */
export class LegacyNodeRunning extends Error {
  readonly code = 'REAKTOR_LEGACY_NODE'
  constructor (pids: readonly number[]) {
    super(`a node of an earlier reaktor-service version (one advisory lock per reaktor) is running on this database (lock session pid ${pids.join(', ')}); ` +
      'the two versions must not run reaktors side by side: stop every node of the earlier version, then start this one')
    this.name = 'LegacyNodeRunning'
  }
}

/** Every tunable with its default, in one place (what production runs; tests lower some). */
export const SCHEDULER_DEFAULTS = {
  shutdownGraceMs: 10_000,
  minIntervalMs: MIN_POLLING_INTERVAL_MS,
  // The reconcile pass pings the lock connection: the dead-connection rule of every dedicated connection.
  reconcileIntervalMs: PING_EVERY_MS,
  flushIntervalMs: 200,
  lockCheckMaxAgeMs: 2000,
  lockQueryTimeoutMs: DEAD_AFTER_MS,
  reconnectMinMs: 250,
  reconnectMaxMs: 5000,
  orphanGraceMs: 3000,
  fencingGraceMs: 200,
  rowsCheckMs: 30_000,
  lockRefusalBackoffMs: 1000,
  coldStartSettleMs: 6000,
  runHistoryPerReaktor: 100
} as const satisfies Partial<SchedulerOptions>

export type SchedulerSettings = Omit<SchedulerOptions, keyof typeof SCHEDULER_DEFAULTS | 'now'> &
  { [K in keyof typeof SCHEDULER_DEFAULTS]: number } & { now: () => number }

/** The options with every default filled in. */
export function withDefaults (opts: SchedulerOptions): SchedulerSettings {
  const defined = Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined))
  return { ...SCHEDULER_DEFAULTS, now: Date.now, ...defined } as SchedulerSettings
}

/** The effective interval of a reaktor: its own, but never below the floor. */
export function effectiveIntervalMs (reaktor: RegisteredPollingReaktor, minIntervalMs: number): number {
  return Math.max(reaktor.intervalMs, minIntervalMs)
}
