import { createHash } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import type { Kysely } from 'kysely'
import { MIN_POLLING_INTERVAL_MS } from '../apps/registry.js'
import type { RegisteredPollingReaktor } from '../apps/types.js'
import type { Database, PollingReaktorRow } from '../db/schema.js'
import { RunResultBatcher } from './batcher.js'
import { formatDuration } from '../duration.js'
import { isResourceRefusal, LockConnection, LockRefused } from './lock-connection.js'
import type { SchedulerLogger } from './logger.js'
import { DEFAULT_PARTITIONS, partitionOf, planOwnership, type ClusterView, type OwnershipShare } from './partitions.js'
import { ReaktorRunner, type RunOutcome } from './runner.js'
import * as store from './store.js'

export interface SchedulerOptions {
  /** Kysely on the shared pool: state reads/writes and the batched run results. */
  db: Kysely<Database>
  /** For the scheduler's own dedicated connection (advisory locks + LISTEN); never pooled. */
  databaseUrl: string
  /** The polling reaktors registered in THIS node's code; a node only ever runs these. */
  reaktors: ReadonlyMap<string, RegisteredPollingReaktor>
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
  /** Every held partition's running rows are compared with its runners about this often (the fallback for a lost notification). Default 30 s. */
  rowsCheckMs?: number
  /** After PostgreSQL refused a lock (full lock table), no new lock is tried for this long, doubling up to 60 s. Default 1 s. */
  lockRefusalBackoffMs?: number
  /**
   * Ownership policy hook, asked before competing for a free partition, on top of the built-in
   * even spreading; default: always. A node that declines simply leaves the lock to another node;
   * correctness never depends on this answer, only on the advisory lock.
   */
  wantsOwnership?: (partition: number, scheduler: Scheduler) => boolean
  /** Told of every finished run on this node (metrics). Must not throw; a throw is ignored. */
  onRunEnd?: (run: RunEnd) => void
  /** Told each time PostgreSQL refuses a lock (metrics). */
  onLockRefused?: () => void
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

export type { OwnershipShare } from './partitions.js'

/** What status and list show; timestamps as Dates, the route formats them. */
export interface PollingReaktorStatus {
  reaktorDefinitionId: string
  state: store.PollingState
  interval: string
  effectiveInterval: string
  lastRun: Date | null
  nextRun: Date | null
  updatedAt: Date | null
  lastError: string | null
  consecutiveFailures: number
  owner: string | null
  label: string | null
  description: string | null
  autoStart: boolean
}

export class UnknownReaktorError extends Error {
  constructor (public readonly reaktorId: string) {
    super(`Polling reaktor "${reaktorId}" is not registered`)
    this.name = 'UnknownReaktorError'
  }
}

/** A node of the previous version (one lock per reaktor) shares the database: never run side by side. */
export class LegacyNodeRunning extends Error {
  constructor (pids: readonly number[]) {
    super(`a node of an earlier reaktor-service version (one advisory lock per reaktor) is running on this database (lock session pid ${pids.join(', ')}); ` +
      'the two versions must not run reaktors side by side: stop every node of the earlier version, then start this one')
    this.name = 'LegacyNodeRunning'
  }
}

/** A partition whose lock this node holds. */
interface HeldPartition {
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
}

/** A runner that no longer owns its reaktor and whose last run has not settled yet. */
interface Draining {
  done: Promise<void>
  runner: ReaktorRunner
  partition: number
}

type Phase = 'idle' | 'starting' | 'running' | 'stopping' | 'stopped'

/** Running reaktors per partition are re-counted at least this often (and at once after a state change). */
const CENSUS_MAX_AGE_MS = 10_000
const LOCK_REFUSAL_MAX_BACKOFF_MS = 60_000
/** A handover retries its final flush this many times, a second apart, before it releases anyway. */
const HANDOVER_FLUSH_ATTEMPTS = 30
/** Partition locks taken per statement: after a refusal, at most this many were taken in vain. */
const LOCK_CHUNK = 64
/** Partitions given back after a refusal, so that PostgreSQL keeps room for other sessions' locks. */
const LOCK_HEADROOM = 64

/**
 * The distributed timer. One instance per node.
 *
 * Ownership by partition: a reaktor runs only on the node whose dedicated lock connection holds
 * the session advisory lock of its partition `(PARTITION_LOCK_NAMESPACE, partitionOf(id))`. Lock
 * use is bounded by the partition count, not by the number of reaktors. A full reconcile pass
 * (every `reconcileIntervalMs`, and at once when a partition is announced free) reads pg_locks and
 * the running reaktors per partition, and plans (partitions.ts): take free partitions while under
 * the fair share, hand the surplus over. A per-id pass (for ids announced by LISTEN/NOTIFY or
 * changed through this node) starts and stops the runners of the held partitions.
 *
 * Handover happens between runs: the partition's runners finish their in-flight runs without an
 * abort, their results are flushed, then the lock is released and announced, so an under-share
 * node takes it at once and continues each reaktor from its stored next run. A stopped reaktor's
 * aborted run settles before the same reaktor can start again; its partition is not released
 * before that either, so runs never overlap.
 *
 * Fencing: when the lock connection breaks, every run is aborted at once and nothing new starts;
 * only then does the node reconnect and compete again. Before each run the runner checks that the
 * connection answered recently (else it pings it first).
 */
export class Scheduler {
  private readonly db: Kysely<Database>
  private readonly reaktors: ReadonlyMap<string, RegisteredPollingReaktor>
  private readonly log: SchedulerLogger
  /** The logger runs get a child of (bound to reaktorId and runId, not to the scheduler). */
  private readonly runLog: SchedulerLogger
  private readonly now: () => number
  private readonly minIntervalMs: number
  private readonly shutdownGraceMs: number
  private readonly reconcileIntervalMs: number
  private readonly lockCheckMaxAgeMs: number
  private readonly reconnectMinMs: number
  private readonly reconnectMaxMs: number
  private readonly orphanGraceMs: number
  private readonly lockRefusalBackoffMs: number
  private readonly rowsCheckMs: number
  private readonly configuredPartitions: number | undefined
  private readonly lock: LockConnection
  private readonly batcher: RunResultBatcher

  private phase: Phase = 'idle'
  private partitionCount = 0
  /** Registered id → its partition; partition → registered ids. */
  private readonly partitionOfId = new Map<string, number>()
  /** Sorted registered ids and their fingerprint, published for the other nodes. */
  private registeredIds: string[] = []
  private fingerprint = ''
  /** Partitions this node holds the lock of. */
  private readonly held = new Map<number, HeldPartition>()
  /** Runners let go of (stop, restart, handover, fencing) whose last run has not settled yet. */
  private readonly draining = new Map<string, Draining>()
  /** performance.now() since which a partition has been seen held by nobody (full passes). */
  private readonly freeSince = new Map<number, number>()
  /** Partitions taken as orphans: not handed over again before this performance.now(). */
  private readonly keepUntil = new Map<number, number>()
  private weights = new Map<number, number>()
  private censusAt = Number.NEGATIVE_INFINITY
  private censusDirty = true
  /** Where the next slice of the periodic rows check starts, and whether the next one takes all. */
  private resyncCursor = 0
  private resyncAll = false
  /** Clusters whose nodes register different reaktors: the registrations of the other fingerprints. */
  private readonly registeredByFingerprint = new Map<string, Set<string>>()
  private partialRunning: { key: string, byPartition: Map<number, string[]> } | undefined
  private lastShare: OwnershipShare = { members: 0, running: 0, share: 0, partitionShare: 0, load: 0, held: 0 }
  private legacy: number[] = []
  private refusal: { since: number, retryAt: number, delayMs: number, message: string } | undefined
  /** Times PostgreSQL refused a lock (for tests; metrics count through onLockRefused). */
  lockRefusals = 0
  /** Grows each time the lock connection is lost: locks taken under an older epoch are gone. */
  private epoch = 0
  private readonly dirty = new Set<string>()
  private dirtyAll = false
  private worker: Promise<void> | undefined
  private tickTimer: NodeJS.Timeout | undefined
  private reconnectTimer: NodeJS.Timeout | undefined
  private reconnectDelay: number
  private reconnecting = false
  /** Membership held on the current connection: passes run only then (not between connect and join). */
  private joined = false
  /** Partitions deleted from `held` whose unlock is on its way (not strays). */
  private readonly releasing = new Set<number>()
  private coldStarted: boolean | undefined
  private readonly coldStartSettleMs: number
  private readonly onRunEnd: ((run: RunEnd) => void) | undefined
  private readonly onLockRefused: (() => void) | undefined
  private readonly reconcileHook: SchedulerOptions['reconcileHook']
  /**
   * The newest `state_version` this node wrote (start/stop) per reaktor: a runner is never started
   * from an older read of the row, i.e. a read that predates a stop this node acknowledged.
   */
  private readonly writtenVersion = new Map<string, bigint>()
  private stopping: Promise<void> | undefined
  /** What stopScheduling() aborted: awaited (up to the grace period) by stop(). */
  private halting: { at: number, partitions: number[], settled: Array<Promise<unknown>> } | undefined

  readonly nodeId: string

  constructor (opts: SchedulerOptions) {
    this.db = opts.db
    this.reaktors = opts.reaktors
    this.nodeId = opts.nodeId
    this.log = opts.log.child({ component: 'scheduler' })
    this.runLog = opts.log
    this.now = opts.now ?? Date.now
    this.minIntervalMs = opts.minIntervalMs ?? MIN_POLLING_INTERVAL_MS
    this.shutdownGraceMs = opts.shutdownGraceMs ?? 10_000
    this.reconcileIntervalMs = opts.reconcileIntervalMs ?? 1000
    this.lockCheckMaxAgeMs = opts.lockCheckMaxAgeMs ?? 2000
    this.reconnectMinMs = opts.reconnectMinMs ?? 250
    this.reconnectMaxMs = opts.reconnectMaxMs ?? 5000
    this.orphanGraceMs = opts.orphanGraceMs ?? 3000
    this.lockRefusalBackoffMs = opts.lockRefusalBackoffMs ?? 1000
    this.rowsCheckMs = opts.rowsCheckMs ?? 30_000
    this.configuredPartitions = opts.partitions
    this.reconnectDelay = this.reconnectMinMs
    this.coldStartSettleMs = opts.coldStartSettleMs ?? 6000
    this.onRunEnd = opts.onRunEnd
    this.onLockRefused = opts.onLockRefused
    this.reconcileHook = opts.reconcileHook
    if (opts.wantsOwnership !== undefined) this.wantsOwnership = (p) => opts.wantsOwnership!(p, this)
    this.batcher = new RunResultBatcher({ db: this.db, owner: opts.nodeId, intervalMs: opts.flushIntervalMs ?? 200, log: this.log })
    this.lock = new LockConnection({
      url: opts.databaseUrl,
      applicationName: `reaktor-scheduler ${opts.nodeId}`.slice(0, 63),
      queryTimeoutMs: opts.lockQueryTimeoutMs ?? 5000,
      onLost: (err) => this.fence(err),
      onNotification: (channel, payload) => this.notified(channel, payload)
    })
  }

  /** Extra policy on top of even spreading; default: no further restriction. */
  private wantsOwnership: (partition: number) => boolean = () => true

  effectiveIntervalMs (reaktor: RegisteredPollingReaktor): number {
    return Math.max(reaktor.intervalMs, this.minIntervalMs)
  }

  /** True after start() found no other live node and applied the restart rules. */
  get coldStart (): boolean | undefined {
    return this.coldStarted
  }

  /** The cluster's partition count (known once started). */
  get partitions (): number {
    return this.partitionCount
  }

  /** The partition of a registered reaktor (undefined before start or for unknown ids). */
  partitionOfReaktor (reaktorId: string): number | undefined {
    return this.partitionOfId.get(reaktorId)
  }

  /** Ids this node currently owns (and times). */
  ownedReaktorIds (): string[] {
    const ids: string[] = []
    for (const hp of this.held.values()) if (!hp.leaving) ids.push(...hp.runners.keys())
    return ids.sort()
  }

  /** Partitions whose lock this node holds. */
  heldPartitions (): number[] {
    return [...this.held.keys()].sort((a, b) => a - b)
  }

  /** The fair share as of the last reconcile pass. */
  get ownershipShare (): OwnershipShare & { owned: number } {
    return { ...this.lastShare, held: this.held.size, owned: this.ownedReaktorIds().length }
  }

  /** Started and its lock connection is up: it can run reaktors (for /readyz). */
  get connected (): boolean {
    return this.phase === 'running' && this.lock.alive
  }

  /**
   * What keeps this node from owning its share, in one line (for /readyz and the logs): a lock
   * refused by PostgreSQL, or a node of the previous version on the same database.
   */
  get problem (): string | undefined {
    if (this.legacy.length > 0) return new LegacyNodeRunning(this.legacy).message
    return this.refusal?.message
  }

  /** Backend pid of the lock connection (pg_locks.pid), undefined while disconnected. */
  get lockConnectionPid (): number | undefined {
    return this.lock.alive ? this.lock.pid : undefined
  }

  /** Flush statistics of the batched run results. */
  get flushStats (): { flushes: number, rows: number, pending: number } {
    return { flushes: this.batcher.flushes, rows: this.batcher.rowsFlushed, pending: this.batcher.size }
  }

  /**
   * Joins the cluster and applies the boot rules: the restart table at a cold start (no other
   * node holds the membership lock), only missing rows otherwise. Then ownership reconciles.
   */
  async start (): Promise<void> {
    if (this.phase !== 'idle') throw new Error(`scheduler cannot start: it is ${this.phase}`)
    this.phase = 'starting'
    try {
      this.partitionCount = await store.ensurePartitions(this.db, this.configuredPartitions, DEFAULT_PARTITIONS)
      for (const id of this.reaktors.keys()) this.partitionOfId.set(id, partitionOf(id, this.partitionCount))
      this.registeredIds = [...this.reaktors.keys()].sort()
      this.fingerprint = createHash('sha256').update(this.registeredIds.join('\n')).digest('base64url')
      await this.lock.connect()
      await this.warnIfLockTableSmall()
      await this.publish()
      await this.lock.holdProtocol()
      const cold = await this.probeColdStart()
      // Still holding the exclusive lock: nodes booting meanwhile wait in holdSharedMembership
      // and see a live cluster, so the restart rules are applied exactly once.
      const boot = [...this.reaktors].map(([id, r]) => ({
        reaktorId: id, interval: r.registration.interval, autoStart: r.registration.autoStart === true, partition: this.partitionOfId.get(id)!
      }))
      const applied = await store.applyBootRules(this.db, boot, new Date(this.now()), cold)
      await this.lock.holdSharedMembership()
      if (cold) await this.lock.releaseExclusiveMembership()
      const { legacy } = await store.readLockView(this.db)
      if (legacy.length > 0) throw new LegacyNodeRunning(legacy)
      // Rows inserted as running: their partition's holder (maybe another node) starts them now.
      if (!cold) await store.announce(this.db, applied.startedIds)
      this.coldStarted = cold
      if (this.phase !== 'starting') throw new Error('scheduler stopped while starting')
      if (!this.lock.alive) throw new Error('the scheduler lock connection was lost while starting')
      this.joined = true
      this.log.info({ nodeId: this.nodeId, coldStart: cold, reaktors: this.reaktors.size, partitions: this.partitionCount, inserted: applied.inserted, stopped: applied.stopped },
        cold ? 'scheduler started: cluster cold start, restart rules applied' : 'scheduler started: joined a live cluster')
    } catch (err) {
      this.phase = 'stopped'
      await this.lock.close()
      throw err
    }
    this.phase = 'running'
    this.armTick()
    this.requestReconcile()
  }

  /**
   * PostgreSQL's shared lock table has about max_locks_per_transaction x (max_connections +
   * max_prepared_transactions) entries for every session together; say so at start when the
   * partition locks alone would take half of it.
   */
  private async warnIfLockTableSmall (): Promise<void> {
    const { rows } = await this.lock.query<{ slots: number }>(`select current_setting('max_locks_per_transaction')::int *
      (current_setting('max_connections')::int + current_setting('max_prepared_transactions')::int) as slots`)
    const slots = rows[0]?.slots ?? Number.POSITIVE_INFINITY
    if (this.partitionCount * 2 > slots) {
      this.log.warn({ partitions: this.partitionCount, lockTableSlots: slots, setting: 'max_locks_per_transaction' },
        `${this.partitionCount} partitions take more than half of this PostgreSQL server's lock table (about ${slots} entries for all sessions): raise max_locks_per_transaction, or use fewer PARTITIONS for a new cluster`)
    }
  }

  /** Tells the other nodes what this one registers (keyed by its lock session), before it joins. */
  private async publish (): Promise<void> {
    await store.publishNode(this.db, { pid: this.lock.pid!, nodeId: this.nodeId, fingerprint: this.fingerprint, registered: this.registeredIds })
  }

  /**
   * Cold-start probe: the exclusive membership lock (held on return when true). When no node holds
   * it but partitions with running reaktors still name other nodes, those nodes did not shut down
   * cleanly: crashed, or merely disconnected (a database restart) and about to reconnect. Then
   * retry for up to coldStartSettleMs before calling it a cold start, so a node booting during a
   * database restart does not apply the restart rules under a live cluster.
   */
  private async probeColdStart (): Promise<boolean> {
    let cold = await this.lock.tryExclusiveMembership()
    if (!cold || this.coldStartSettleMs <= 0 || !(await store.othersOwnedRunning(this.db, this.nodeId))) return cold
    const deadline = performance.now() + this.coldStartSettleMs
    this.log.info({ nodeId: this.nodeId, waitMs: this.coldStartSettleMs },
      'no live node, but other nodes did not shut down cleanly: waiting for them to reconnect before a cold start')
    while (cold && this.phase === 'starting' && performance.now() < deadline) {
      // Not held while waiting: a reconnecting node takes the membership lock shared, without blocking.
      await this.lock.releaseExclusiveMembership()
      await new Promise((resolve) => setTimeout(resolve, Math.max(1, Math.min(250, deadline - performance.now()))))
      cold = await this.lock.tryExclusiveMembership()
    }
    return cold
  }

  /** Every runner of this node: owned ones and those still settling. */
  private allRunners (): ReaktorRunner[] {
    const runners: ReaktorRunner[] = []
    for (const hp of this.held.values()) runners.push(...hp.runners.values())
    for (const d of this.draining.values()) runners.push(d.runner)
    return runners
  }

  /**
   * First half of the shutdown, at once (Fastify's preClose, before HTTP drains): nothing new is
   * scheduled or owned, every in-flight run's signal is aborted, and the grace period starts.
   * stop() then awaits those runs and releases everything.
   */
  stopScheduling (): void {
    if (this.phase === 'idle') { this.phase = 'stopped'; return }
    if (this.phase !== 'running' && this.phase !== 'starting') return
    this.phase = 'stopping'
    this.clearTimers()
    const partitions = [...this.held.keys()]
    const settled: Array<Promise<unknown>> = this.allRunners().map(async (runner) => await runner.halt('shutdown'))
    settled.push(...[...this.draining.values()].map(async (d) => await d.done))
    for (const hp of this.held.values()) hp.runners.clear()
    this.halting = { at: performance.now(), partitions, settled }
  }

  /**
   * Shutdown: nothing new is scheduled, in-flight runs are aborted and awaited up to the grace
   * period (counted from stopScheduling()), results are flushed, ownership is released in the
   * database and the locks on the connection, which is then closed. Concurrent calls share one.
   */
  async stop (): Promise<void> {
    this.stopping ??= this.shutdown()
    await this.stopping
  }

  private async shutdown (): Promise<void> {
    this.stopScheduling()
    const halting = this.halting
    if (halting === undefined) { this.phase = 'stopped'; return }
    const all = Promise.allSettled([...halting.settled, this.worker])
    const graceMs = Math.max(0, this.shutdownGraceMs - (performance.now() - halting.at))
    let graceTimer: NodeJS.Timeout | undefined
    const inTime = await Promise.race([
      all.then(() => true),
      new Promise<boolean>((resolve) => { graceTimer = setTimeout(() => resolve(false), graceMs) })
    ])
    clearTimeout(graceTimer)
    if (!inTime) this.log.warn({ graceMs: this.shutdownGraceMs }, 'runs still in flight after the shutdown grace period; releasing their locks anyway')
    await this.batcher.close()
    // Everything naming this node, not only what it holds now (a takeover cut short by the
    // shutdown): a clean shutdown leaves no owner behind, which tells a clean stop from a crash.
    await store.releaseOwner(this.db, this.nodeId).catch((err) => this.log.warn({ err }, 'could not clear owner at shutdown'))
    this.held.clear()
    await this.lock.close()
    // The locks are gone with the session: tell the other nodes to take these over now, not at
    // their next periodic pass (a rolling restart then costs no interval).
    await store.announcePartitions(this.db, halting.partitions).catch(() => {})
    this.phase = 'stopped'
    this.log.info({ nodeId: this.nodeId, released: halting.partitions.length }, 'scheduler stopped')
  }

  /**
   * Crash simulation for tests: abort everything, drop the unflushed batch, and close the lock
   * connection without unlocking or writing anything else.
   */
  terminate (): void {
    this.phase = 'stopped'
    this.clearTimers()
    for (const runner of this.allRunners()) void runner.halt('terminated')
    this.held.clear()
    this.batcher.discard()
    this.lock.destroy()
  }

  /** Writes `running` (before it is acknowledged) and reconciles at once. False: already running. */
  async startReaktor (reaktorId: string): Promise<boolean> {
    const reaktor = this.registered(reaktorId)
    const { changed, version } = await store.writeStart(this.db, reaktorId, reaktor.registration.interval, new Date(this.now()), this.partitionOfId.get(reaktorId) ?? null)
    this.noteWrittenVersion(reaktorId, version)
    this.requestReconcile([reaktorId])
    return changed
  }

  /** Writes `stopped` (before it is acknowledged); an owned run is aborted at once. False: already stopped. */
  async stopReaktor (reaktorId: string): Promise<boolean> {
    const reaktor = this.registered(reaktorId)
    const { changed, version } = await store.writeStop(this.db, reaktorId, reaktor.registration.interval, new Date(this.now()), this.partitionOfId.get(reaktorId) ?? null)
    // Synchronously with the answer: a reconcile pass that read the row before this stop can no
    // longer start a runner from that read (ensureRunner refuses older versions).
    this.noteWrittenVersion(reaktorId, version)
    this.releaseRunner(reaktorId)
    // A handover in progress waits for its run to end; a stop aborts that run at once.
    void this.draining.get(reaktorId)?.runner.halt('stopped')
    this.requestReconcile([reaktorId])
    return changed
  }

  private noteWrittenVersion (reaktorId: string, version: string | null): void {
    if (version === null) return
    const v = BigInt(version)
    if (v > (this.writtenVersion.get(reaktorId) ?? -1n)) this.writtenVersion.set(reaktorId, v)
  }

  /** The status of one registered reaktor, read from the database (right from any node). */
  async status (reaktorId: string): Promise<PollingReaktorStatus> {
    const reaktor = this.registered(reaktorId)
    const [row] = await store.readRows(this.db, [reaktorId])
    return this.toStatus(reaktorId, reaktor, row)
  }

  /** Every registered reaktor's status, sorted by id. */
  async list (): Promise<PollingReaktorStatus[]> {
    const ids = [...this.reaktors.keys()].sort()
    const rows = new Map((await store.readRows(this.db, ids)).map((r) => [r.reaktor_id, r]))
    return ids.map((id) => this.toStatus(id, this.reaktors.get(id)!, rows.get(id)))
  }

  private toStatus (id: string, reaktor: RegisteredPollingReaktor, row: PollingReaktorRow | undefined): PollingReaktorStatus {
    return {
      reaktorDefinitionId: id,
      state: row?.state ?? 'stopped',
      interval: reaktor.registration.interval,
      effectiveInterval: formatDuration(this.effectiveIntervalMs(reaktor)),
      lastRun: row?.last_run ?? null,
      nextRun: row?.state === 'running' ? row.next_run : null,
      updatedAt: row?.updated_at ?? null,
      lastError: row?.last_error ?? null,
      consecutiveFailures: row?.consecutive_failures ?? 0,
      owner: row?.owner ?? null,
      label: reaktor.registration.label ?? null,
      description: reaktor.registration.description ?? null,
      autoStart: reaktor.registration.autoStart === true
    }
  }

  private registered (reaktorId: string): RegisteredPollingReaktor {
    const reaktor = this.reaktors.get(reaktorId)
    if (reaktor === undefined) throw new UnknownReaktorError(reaktorId)
    return reaktor
  }

  // ---------------------------------------------------------------- ownership

  private notified (channel: string, payload: string): void {
    if (channel === store.PARTITION_CHANNEL) {
      // A partition was given back: an under-share node takes it now, not at its next tick.
      this.requestReconcile()
      return
    }
    if (channel !== store.NOTIFY_CHANNEL) return
    // Any state change moves the running counts (the weights of even spreading).
    this.censusDirty = true
    this.partialRunning = undefined
    this.requestReconcile([payload])
  }

  /** Queues a reconcile of some ids (or a full pass); one worker runs them in order, never concurrently. */
  requestReconcile (ids?: Iterable<string>): void {
    if (this.phase !== 'running') return
    if (ids === undefined) this.dirtyAll = true
    else for (const id of ids) if (this.reaktors.has(id)) this.dirty.add(id)
    if (this.worker !== undefined || (!this.dirtyAll && this.dirty.size === 0)) return
    this.worker = (async () => {
      try {
        while (this.phase === 'running' && (this.dirtyAll || this.dirty.size > 0)) {
          const full = this.dirtyAll
          const ids = [...this.dirty]
          this.dirtyAll = false
          this.dirty.clear()
          try {
            if (full) await this.fullPass()
            if (ids.length > 0) await this.idsPass(ids)
          } catch (err) {
            // The database or the lock connection is gone; the tick (or the reconnect) retries.
            if (full) this.dirtyAll = true
            for (const id of ids) this.dirty.add(id)
            this.log.warn({ err }, 'ownership reconcile failed')
            break
          }
        }
      } finally {
        this.worker = undefined
      }
    })()
  }

  /** The held partition a registered id runs in, when this node may start it there. */
  private heldFor (reaktorId: string): HeldPartition | undefined {
    const p = this.partitionOfId.get(reaktorId)
    const hp = p === undefined ? undefined : this.held.get(p)
    return hp === undefined || hp.leaving || hp.epoch !== this.epoch ? undefined : hp
  }

  /** Start/stop of some ids (notified, or through this node): only those of held partitions matter here. */
  private async idsPass (ids: string[]): Promise<void> {
    if (!this.joined || !this.lock.alive) return
    // Ids of held partitions, and ids whose runner is settling (a handover's last run is aborted
    // by a stop through any node, not only through this one).
    const mine = ids.filter((id) => this.heldFor(id) !== undefined || this.draining.has(id))
    if (mine.length === 0) return
    const epoch = this.epoch
    const rows = await store.readSchedule(this.db, mine)
    if (epoch !== this.epoch || this.phase !== 'running') return
    const byId = new Map(rows.map((r) => [r.reaktorId, r]))
    const start: store.ScheduleRow[] = []
    for (const id of mine) {
      const row = byId.get(id)
      const settling = this.draining.get(id)?.runner
      if (settling !== undefined && (row === undefined || row.state !== 'running' || row.version !== settling.version)) void settling.halt('stopped')
      const runner = this.heldFor(id)?.runners.get(id)
      // Stopped, or stopped and started again (new version): this run series is over.
      if (runner !== undefined && (row === undefined || row.state !== 'running' || row.version !== runner.version)) this.releaseRunner(id)
      if (row?.state === 'running' && this.heldFor(id) !== undefined && this.heldFor(id)?.runners.has(id) !== true) start.push(row)
    }
    await this.startRunners(start, epoch)
  }

  /**
   * Starts runners for running rows read under the partition lock. The rows are read once more
   * right before, like a claim: a reaktor stopped (or stopped and started) in between, through any
   * node, is not started from the first read but looked at again.
   */
  private async startRunners (rows: store.ScheduleRow[], epoch: number): Promise<void> {
    let ready = rows.filter((r) => this.reaktors.has(r.reaktorId) && !this.draining.has(r.reaktorId))
    if (ready.length === 0) return
    await this.reconcileHook?.('locked', ready.map((r) => r.reaktorId))
    const again = new Map((await store.readSchedule(this.db, ready.map((r) => r.reaktorId))).map((r) => [r.reaktorId, r]))
    if (epoch !== this.epoch) return
    const changed = ready.filter((r) => again.get(r.reaktorId)?.version !== r.version)
    ready = ready.filter((r) => again.get(r.reaktorId)?.version === r.version && again.get(r.reaktorId)?.state === 'running')
      .map((r) => again.get(r.reaktorId)!)
    if (changed.length > 0) this.requestReconcile(changed.map((r) => r.reaktorId))
    await this.reconcileHook?.('claimed', ready.map((r) => r.reaktorId))
    if (epoch !== this.epoch || this.phase !== 'running') return
    for (const row of ready) this.ensureRunner(row)
  }

  /**
   * Starts timing a running reaktor of a held partition. Refused when the scheduler is no longer
   * running, the id has a runner or one still settling (it is looked at again once that settled),
   * or this node has since written a newer version of it (a stop acknowledged after the read).
   */
  private ensureRunner (row: store.ScheduleRow): void {
    const id = row.reaktorId
    const reaktor = this.reaktors.get(id)
    const hp = this.heldFor(id)
    if (reaktor === undefined || hp === undefined || this.phase !== 'running' || hp.runners.has(id) || this.draining.has(id)) return
    if (BigInt(row.version) < (this.writtenVersion.get(id) ?? -1n)) {
      this.log.debug({ reaktorId: id, version: row.version }, 'read predates a start/stop written by this node; not started')
      return
    }
    const runner: ReaktorRunner = new ReaktorRunner({
      reaktorId: id,
      reaktor,
      effectiveIntervalMs: this.effectiveIntervalMs(reaktor),
      version: row.version,
      consecutiveFailures: row.consecutiveFailures,
      nodeId: this.nodeId,
      partition: hp.partition,
      generation: hp.generation,
      log: this.runLog,
      now: this.now,
      mayRun: () => this.mayRun(id, runner),
      onRunEnd: (record, outcome, durationMs) => {
        this.batcher.record(record)
        if (this.onRunEnd === undefined) return
        try {
          this.onRunEnd({ reaktorId: id, outcome, durationMs })
        } catch (err) {
          this.log.warn({ err, reaktorId: id }, 'onRunEnd observer failed')
        }
      }
    })
    hp.runners.set(id, runner)
    // Continue from the stored next run: due or overdue means exactly one run now.
    runner.start(row.nextRun?.getTime() ?? null)
  }

  /** Stops the runner of a reaktor (stop, restart): its partition stays held, the id is looked at again once the run settled. */
  private releaseRunner (reaktorId: string): void {
    const p = this.partitionOfId.get(reaktorId)
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
  private drain (reaktorId: string, partition: number, runner: ReaktorRunner, work: Promise<void>): void {
    const hp = this.held.get(partition)
    const done: Promise<void> = work.catch((err) => {
      this.log.warn({ err, reaktorId }, 'polling reaktor runner did not settle cleanly')
    }).finally(() => {
      if (this.draining.get(reaktorId)?.done === done) this.draining.delete(reaktorId)
      hp?.settling.delete(done)
      this.requestReconcile([reaktorId])
    })
    hp?.settling.add(done)
    this.draining.set(reaktorId, { done, runner, partition })
  }

  /** Before each run: still the owner, and the lock connection answered recently (else ping it). */
  private mayRun (id: string, runner: ReaktorRunner): boolean | Promise<boolean> {
    if (this.phase !== 'running' || this.heldFor(id)?.runners.get(id) !== runner || !this.lock.alive) return false
    if (performance.now() - this.lock.lastOkAt <= this.lockCheckMaxAgeMs) return true
    return this.lock.ping().then((ok) => ok && this.heldFor(id)?.runners.get(id) === runner)
  }

  /**
   * One full pass: who holds what (pg_locks), the running reaktors per partition (when changed),
   * then the plan: give the surplus back between runs, take free partitions under the share.
   */
  private async fullPass (): Promise<void> {
    const me = this.lock.pid
    if (!this.joined || !this.lock.alive || me === undefined) return
    const epoch = this.epoch
    const view = await store.readLockView(this.db)
    if (epoch !== this.epoch || this.phase !== 'running') return
    if (this.noteLegacy(view.legacy)) return
    // Locks this session holds that the bookkeeping does not know (a statement that failed after
    // taking some): give them back, or nobody would run those partitions.
    const strays = [...view.holders].filter(([p, pid]) => pid === me && !this.held.has(p) && !this.releasing.has(p)).map(([p]) => p)
    if (strays.length > 0) {
      this.log.warn({ partitions: strays.length }, 'releasing partition locks held without bookkeeping')
      await this.lock.unlock(strays)
      for (const p of strays) view.holders.delete(p)
    }
    if (!view.fingerprints.has(me)) await this.publish()
    if (this.censusDirty || performance.now() - this.censusAt > CENSUS_MAX_AGE_MS) {
      this.censusDirty = false
      this.censusAt = performance.now()
      this.weights = await store.readCensus(this.db)
    }
    const members = view.members.includes(me) ? view.members : [...view.members, me]
    const eligible = await this.eligibility(members, view.fingerprints)
    if (epoch !== this.epoch || this.phase !== 'running') return

    const at = performance.now()
    for (let p = 0; p < this.partitionCount; p++) {
      if (view.holders.has(p)) this.freeSince.delete(p)
      else if (!this.freeSince.has(p)) this.freeSince.set(p, at)
    }
    const orphans = new Set<number>()
    for (const [p, since] of this.freeSince) if (at - since >= this.orphanGraceMs) orphans.add(p)
    for (const [p, until] of this.keepUntil) if (until <= at) this.keepUntil.delete(p)
    const leaving = new Set([...this.held.values()].filter((hp) => hp.leaving).map((hp) => hp.partition))
    for (const p of this.releasing) leaving.add(p)
    // A partition whose stopped reaktor's run has not settled yet is not handed over now: its
    // other reaktors would wait for that run too.
    const keep = new Set(this.keepUntil.keys())
    for (const hp of this.held.values()) if (hp.settling.size > 0) keep.add(hp.partition)
    const cluster: ClusterView = { me, members, holders: view.holders, weights: this.weights, partitions: this.partitionCount, eligible }
    const plan = planOwnership(cluster, { orphans, keep, leaving, shuffle })
    if (plan.share.share !== this.lastShare.share || plan.share.members !== this.lastShare.members) {
      this.log.debug({ nodeId: this.nodeId, ...plan.share }, 'fair share changed')
    }
    this.lastShare = plan.share
    for (const p of plan.give) this.handOver(p)
    const take = plan.take.filter((p) => this.wantsOwnership(p) && !this.held.has(p))
    if (take.length === 0 && this.refusal !== undefined && this.mayAcquire()) {
      // Nothing left to take (others took what this node gave back): no refusal stands.
      this.log.info({ nodeId: this.nodeId }, 'no partition lock wanted any more; the lock refusal is over')
      this.refusal = undefined
    }
    if (take.length > 0 && this.mayAcquire()) {
      const lost = await this.acquire(take, epoch, orphans)
      // Lost races (another node took some first): look again at once with the new holders.
      if (lost > 0 && epoch === this.epoch) this.dirtyAll = true
    }
    await this.resyncRows(epoch)
  }

  /**
   * The fallback for lost notifications: the running rows of the held partitions against the
   * runners. A slice per pass, so that every held partition is checked about every 30 s without
   * reading tens of thousands of rows at once (that would hold up every timer of this node).
   */
  private async resyncRows (epoch: number): Promise<void> {
    const held = [...this.held.values()].filter((hp) => !hp.leaving).map((hp) => hp.partition).sort((a, b) => a - b)
    if (held.length === 0) return
    const count = this.resyncAll ? held.length : Math.max(1, Math.ceil(held.length * this.reconcileIntervalMs / this.rowsCheckMs))
    this.resyncAll = false
    const first = Math.max(0, held.findIndex((p) => p >= this.resyncCursor))
    const slice = Array.from({ length: Math.min(count, held.length) }, (_v, i) => held[(first + i) % held.length])
    const rows = await store.readRunningIn(this.db, slice)
    if (epoch !== this.epoch || this.phase !== 'running') return
    this.resyncCursor = slice[slice.length - 1] + 1
    const running = new Map(rows.map((r) => [r.reaktorId, r]))
    const changed: string[] = []
    for (const p of slice) {
      for (const [id, runner] of this.held.get(p)?.runners ?? []) {
        const row = running.get(id)
        if (row === undefined || row.version !== runner.version) changed.push(id)
      }
    }
    for (const row of rows) if (this.reaktors.has(row.reaktorId) && this.heldFor(row.reaktorId)?.runners.has(row.reaktorId) !== true) changed.push(row.reaktorId)
    if (changed.length > 0) {
      this.log.info({ count: changed.length }, 'periodic check found polling reaktors whose start or stop was not seen; reconciling them')
      this.requestReconcile(changed)
    }
  }

  /**
   * Takes the locks of free partitions (a chunk per statement), claims them (a new generation
   * each) and starts the runners of their running reaktors. Returns how many partitions were lost
   * to another node or not tried because PostgreSQL refused a lock.
   */
  private async acquire (partitions: number[], epoch: number, orphans: ReadonlySet<number>): Promise<number> {
    let lost = 0
    for (let i = 0; i < partitions.length; i += LOCK_CHUNK) {
      const chunk = partitions.slice(i, i + LOCK_CHUNK)
      let granted: Set<number>
      try {
        granted = await this.lock.tryLocks(chunk)
      } catch (err) {
        if (!(err instanceof LockRefused)) throw err
        // The statement failed part-way: the locks it took before the refusal are held anyway
        // (session locks ignore the rollback). They were never recorded: give them back.
        const now = await this.lock.heldPartitions()
        await this.lock.unlock(chunk.filter((p) => now.has(p) && !this.held.has(p)))
        if (epoch !== this.epoch) return 0
        this.noteRefusal(err)
        return lost + partitions.length - i
      }
      if (epoch !== this.epoch) return 0
      lost += chunk.length - granted.size
      try {
        if (granted.size > 0) await this.claim([...granted], epoch, orphans)
      } catch (err) {
        // The locks fit, but then the table was too full for the claim's own statements (every
        // writing transaction takes a lock-table slot): the same refusal. A failed claim gave the
        // locks back; partitions claimed before a failed read stay held and are re-checked.
        if (!isResourceRefusal(err) || epoch !== this.epoch) throw err
        this.noteRefusal(err)
        return lost + partitions.length - i
      }
      if (epoch !== this.epoch) return 0
    }
    if (this.refusal !== undefined) {
      this.log.info({ nodeId: this.nodeId, refusedForMs: Math.round(performance.now() - this.refusal.since) }, 'PostgreSQL grants advisory locks again')
      this.refusal = undefined
    }
    return lost
  }

  /** Records partitions just locked as held (a new generation each) and starts their runners. */
  private async claim (got: number[], epoch: number, orphans: ReadonlySet<number>): Promise<void> {
    const at = performance.now()
    try {
      const generations = await store.claimPartitions(this.db, this.nodeId, got)
      if (epoch !== this.epoch) return
      for (const p of got) {
        this.held.set(p, { partition: p, generation: generations.get(p) ?? '0', epoch, runners: new Map(), leaving: false, settling: new Set() })
        this.freeSince.delete(p)
        if (orphans.has(p)) this.keepUntil.set(p, at + 10 * this.orphanGraceMs)
      }
    } catch (err) {
      // Not recorded as held: give the locks back, or they would never be released.
      if (epoch === this.epoch) await this.lock.unlock(got).catch(() => {})
      throw err
    }
    let rows: store.ScheduleRow[]
    try {
      rows = await store.readRunningIn(this.db, got)
      if (epoch !== this.epoch) return
      await this.startRunners(rows, epoch)
    } catch (err) {
      // Held, but runners not started: the next pass compares rows and runners again at once.
      this.resyncAll = true
      throw err
    }
    const unknown = rows.filter((r) => !this.reaktors.has(r.reaktorId)).length
    if (unknown > 0) this.partialRunning = undefined
    this.log.info({ nodeId: this.nodeId, partitions: got.length <= 20 ? got : undefined, count: got.length, reaktors: rows.length - unknown, ...this.lastShare, held: this.held.size },
      'took ownership of partitions')
  }

  private mayAcquire (): boolean {
    return this.refusal === undefined || performance.now() >= this.refusal.retryAt
  }

  /**
   * PostgreSQL's lock table is full. Keep what is held, try again later (doubling up to a minute),
   * and say once, clearly, what to change: no error loop, and /readyz and /metrics show it.
   */
  private noteRefusal (err: unknown): void {
    this.lockRefusals++
    this.onLockRefused?.()
    const delayMs = this.refusal === undefined ? this.lockRefusalBackoffMs : Math.min(this.refusal.delayMs * 2, LOCK_REFUSAL_MAX_BACKOFF_MS)
    const message = `PostgreSQL refused advisory locks (its shared lock table is full): this node holds ${this.held.size} of ${this.partitionCount} partitions, ` +
      `gives back up to ${LOCK_HEADROOM} to leave room for other sessions, and retries with backoff. ` +
      'Raise max_locks_per_transaction on the PostgreSQL server (restart needed), use fewer PARTITIONS for a new cluster, or look for another client holding many locks'
    if (this.refusal === undefined) {
      this.log.error({ err, nodeId: this.nodeId, held: this.held.size, partitions: this.partitionCount, setting: 'max_locks_per_transaction' }, message)
    } else {
      this.log.debug({ err, retryInMs: delayMs }, 'advisory locks still refused')
    }
    this.refusal = { since: this.refusal?.since ?? performance.now(), retryAt: performance.now() + delayMs, delayMs, message }
    // A full lock table fails every session of the server (even new connections need a slot):
    // leave room, giving back some partitions, the empty ones first (between runs, like a handover).
    const spare = [...this.held.values()].filter((hp) => !hp.leaving)
      .sort((a, b) => (this.weights.get(a.partition) ?? 0) - (this.weights.get(b.partition) ?? 0))
      .slice(0, LOCK_HEADROOM)
    for (const hp of spare) this.handOver(hp.partition)
  }

  /** A node of the previous version shares the database: run nothing while it is alive. */
  private noteLegacy (legacy: number[]): boolean {
    const was = this.legacy.length > 0
    this.legacy = legacy
    if (legacy.length === 0) {
      if (was) this.log.info({ nodeId: this.nodeId }, 'the earlier-version node is gone; competing for partitions again')
      return false
    }
    if (!was) this.log.error({ nodeId: this.nodeId, pids: legacy }, `${new LegacyNodeRunning(legacy).message}; this node gives back its partitions until then`)
    for (const p of this.held.keys()) this.handOver(p, true)
    return true
  }

  /**
   * Nodes registering the same reaktors (the same fingerprint) can all run every partition: no
   * eligibility then. Otherwise a node can run a partition when it registers each running reaktor
   * of it that not every member registers.
   */
  private async eligibility (members: readonly number[], fingerprints: ReadonlyMap<number, string>): Promise<ClusterView['eligible']> {
    const me = this.lock.pid!
    const fingerprintOf = (pid: number): string => pid === me ? this.fingerprint : fingerprints.get(pid) ?? this.fingerprint
    if (members.every((pid) => fingerprintOf(pid) === this.fingerprint)) return undefined
    this.registeredByFingerprint.set(this.fingerprint, new Set(this.registeredIds))
    const missing = members.filter((pid) => !this.registeredByFingerprint.has(fingerprintOf(pid)))
    for (const [, node] of await store.readRegistered(this.db, missing)) this.registeredByFingerprint.set(node.fingerprint, new Set(node.registered))
    const sets = new Map(members.map((pid) => [pid, this.registeredByFingerprint.get(fingerprintOf(pid)) ?? new Set<string>()]))
    const key = [...new Set(sets.values())].length + ':' + [...new Set(members.map(fingerprintOf))].sort().join(',')
    if (this.partialRunning?.key !== key) {
      // Ids some member registers and another does not: only their partitions need a capable node.
      const all = [...sets.values()]
      const union = new Set(all.flatMap((s) => [...s]))
      const partial = [...union].filter((id) => !all.every((s) => s.has(id)))
      const byPartition = new Map<number, string[]>()
      for (const { reaktorId, partition } of await store.readRunningIds(this.db, partial)) {
        byPartition.set(partition, [...(byPartition.get(partition) ?? []), reaktorId])
      }
      this.partialRunning = { key, byPartition }
    }
    const byPartition = this.partialRunning.byPartition
    return (p, pid) => (byPartition.get(p) ?? []).every((id) => sets.get(pid)?.has(id) === true)
  }

  /**
   * Gives a partition back. Handover (balance): its runners finish their in-flight runs without
   * an abort; `halt` (an earlier-version node appeared): they are aborted. Then the results are
   * flushed, the owner cleared, the lock released and announced, so that the next holder (an
   * under-share node, notified at once) continues each reaktor from its stored next run.
   */
  private handOver (partition: number, halt = false): void {
    const hp = this.held.get(partition)
    if (hp === undefined || hp.leaving) return
    hp.leaving = true
    for (const [id, runner] of hp.runners) this.drain(id, partition, runner, halt ? runner.halt('handed over') : runner.finish())
    hp.runners.clear()
    const current = (): boolean => this.held.get(partition) === hp && hp.epoch === this.epoch && this.phase === 'running'
    let attempts = 0
    const release = async (): Promise<void> => {
      // Until every last run of the partition has settled (a stop may have let go of one before).
      while (hp.settling.size > 0) await Promise.all([...hp.settling])
      if (!current()) return
      try {
        await this.batcher.flush()
      } catch (err) {
        // The next holder continues from the stored next runs: release once they are written, or
        // after HANDOVER_FLUSH_ATTEMPTS seconds anyway (then at worst one early run each).
        if (++attempts < HANDOVER_FLUSH_ATTEMPTS) {
          this.log.warn({ err, partition, attempts }, 'handover: could not persist the last run results; retrying')
          setTimeout(() => {
            if (current()) release().catch((e) => this.log.warn({ err: e, partition }, 'could not hand over partition'))
          }, 1000).unref()
          return
        }
        this.log.warn({ err, partition, attempts }, 'handover: the last run results could not be persisted; releasing the partition anyway')
      }
      await store.releasePartitions(this.db, this.nodeId, [partition]).catch((err) => this.log.warn({ err, partition }, 'handover: could not clear the owner'))
      if (!current()) return
      this.held.delete(partition)
      this.releasing.add(partition)
      try {
        const notHeld = await this.lock.unlock([partition])
        if (notHeld.length > 0) this.log.error({ partition }, 'advisory lock was not held at release (bookkeeping bug)')
      } finally {
        this.releasing.delete(partition)
      }
      await store.announcePartitions(this.db, [partition])
      this.log.debug({ nodeId: this.nodeId, partition }, 'partition handed over between runs')
    }
    release().catch((err) => {
      this.log.warn({ err, partition }, 'could not hand over partition')
    })
  }

  /**
   * The lock connection broke: every lock is gone with it, so every run stops NOW (another node
   * may take these partitions over at any moment). Then reconnect and compete again.
   */
  private fence (err: unknown): void {
    this.epoch++
    this.joined = false
    this.releasing.clear()
    const aborted: string[] = []
    for (const hp of this.held.values()) {
      for (const [id, runner] of hp.runners) {
        aborted.push(id)
        this.drain(id, hp.partition, runner, runner.halt('lock connection lost'))
      }
    }
    this.held.clear()
    // Handovers and stops in progress lost their lock too: their runs are aborted like the others.
    for (const d of this.draining.values()) void d.runner.halt('lock connection lost')
    if (this.phase !== 'running' && this.phase !== 'starting') return
    this.log.error({ err, nodeId: this.nodeId, aborted: aborted.length <= 20 ? aborted : undefined, count: aborted.length },
      'scheduler lock connection lost: all runs aborted (fencing); reconnecting')
    if (this.phase === 'running') this.scheduleReconnect()
  }

  private scheduleReconnect (): void {
    if (this.reconnectTimer !== undefined || this.phase !== 'running') return
    // ±20 % jitter: after a database restart the nodes do not all knock at the same instant.
    const delay = Math.round(this.reconnectDelay * (0.8 + 0.4 * Math.random()))
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined
      void this.reconnect()
    }, delay)
  }

  private async reconnect (): Promise<void> {
    if (this.phase !== 'running' || this.lock.alive || this.reconnecting) return
    this.reconnecting = true
    this.joined = false
    try {
      await this.lock.connect()
      await this.publish()
      // A reconnect is never a cold start: the restart rules belong to boot only.
      await this.lock.holdProtocol()
      await this.lock.holdSharedMembership()
      this.reconnectDelay = this.reconnectMinMs
      this.log.info({ nodeId: this.nodeId, pid: this.lock.pid }, 'scheduler lock connection re-established; competing for ownership again')
      if (this.phase !== 'running') { await this.lock.close(); return }
      this.joined = true
      this.censusDirty = true
      this.requestReconcile()
    } catch (err) {
      this.reconnectDelay = Math.min(this.reconnectDelay * 2, this.reconnectMaxMs)
      const refused = (err as { cause?: { code?: unknown } })?.cause?.code
      const hint = typeof refused === 'string' && refused.startsWith('53') ? ' (PostgreSQL is short of resources: for "out of shared memory" raise max_locks_per_transaction)' : ''
      this.log.warn({ err, retryInMs: this.reconnectDelay }, `scheduler lock connection: reconnect failed${hint}`)
      // Up but not set up: lost like any connection (fencing), so nothing taken on it survives.
      if (this.lock.alive) this.lock.drop(err)
      else this.lock.destroy()
      this.scheduleReconnect()
    } finally {
      this.reconnecting = false
    }
  }

  private armTick (): void {
    this.tickTimer = setTimeout(() => {
      void (async () => {
        if (this.phase !== 'running') return
        if (this.lock.alive) {
          // Keeps lastOkAt fresh (runs then skip their own ping) and detects a dead socket.
          if (await this.lock.ping()) this.requestReconcile()
        } else {
          this.scheduleReconnect()
        }
      })().finally(() => { if (this.phase === 'running') this.armTick() })
    }, this.reconcileIntervalMs)
  }

  private clearTimers (): void {
    if (this.tickTimer !== undefined) clearTimeout(this.tickTimer)
    if (this.reconnectTimer !== undefined) clearTimeout(this.reconnectTimer)
    this.tickTimer = undefined
    this.reconnectTimer = undefined
  }
}

/** Fisher–Yates, in place. */
function shuffle<T> (items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1))
    ;[items[i], items[j]] = [items[j], items[i]]
  }
  return items
}
