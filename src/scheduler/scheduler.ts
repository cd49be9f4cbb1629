import { performance } from 'node:perf_hooks'
import { recordAudit } from '../audit/record.js'
import { RunResultBatcher } from './batcher.js'
import { LockConnection } from './ownership/lock-connection.js'
import type { SchedulerLogger } from './logger.js'
import { ReaktorControl, type ControlAction, type ControlOutcome } from './control.js'
import { LegacyNodeRunning, withDefaults, type SchedulerOptions, type SchedulerSettings } from './options.js'
import { PartitionOwnership } from './partition-ownership.js'
import { partitionOf, type OwnershipShare } from './ownership/partitions.js'
import { PartitionRunners, type HaltedRun, type SchedulerContext } from './partition-runners.js'
import * as partitionStore from './ownership/partition-store.js'
import { parseRunRequest, RUN_NOW_CHANNEL } from './run-now.js'
import * as store from './reaktor-store.js'
import { applyRegistrationChange, applyWaitingChanges, type RegistrationChange } from './registrations.js'

export { LegacyNodeRunning, UnknownReaktorError, type RunEnd, type SchedulerOptions } from './options.js'
export type { OwnershipShare } from './ownership/partitions.js'

type Phase = 'idle' | 'starting' | 'running' | 'stopping' | 'stopped'

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
  private readonly settings: SchedulerSettings
  private readonly log: SchedulerLogger
  private readonly lock: LockConnection
  private readonly batcher: RunResultBatcher
  /** What the parts share: settings, connection, batcher, epoch, partitions. */
  private readonly ctx: SchedulerContext
  private readonly runners: PartitionRunners
  private readonly ownership: PartitionOwnership
  private readonly control: ReaktorControl

  private phase: Phase = 'idle'
  private readonly dirty = new Set<string>()
  private dirtyAll = false
  private worker: Promise<void> | undefined
  private tickTimer: NodeJS.Timeout | undefined
  private reconnectTimer: NodeJS.Timeout | undefined
  private reconnectDelay: number
  private reconnecting = false
  private coldStarted: boolean | undefined
  private stopping: Promise<void> | undefined
  /** What stopScheduling() aborted: awaited (up to the grace period) by stop(). */
  private halting: { at: number, partitions: number[], runs: HaltedRun[] } | undefined

  readonly nodeId: string

  constructor (opts: SchedulerOptions) {
    this.settings = withDefaults(opts)
    this.nodeId = opts.nodeId
    this.log = opts.log.child({ component: 'scheduler' })
    this.reconnectDelay = this.settings.reconnectMinMs
    this.batcher = new RunResultBatcher({ db: opts.db, owner: opts.nodeId, intervalMs: this.settings.flushIntervalMs, log: this.log, historyPerReaktor: this.settings.runHistoryPerReaktor })
    this.lock = new LockConnection({
      url: opts.databaseUrl,
      applicationName: `reaktor-scheduler ${opts.nodeId}`.slice(0, 63),
      queryTimeoutMs: this.settings.lockQueryTimeoutMs,
      onLost: (err) => this.fence(err),
      channels: [store.NOTIFY_CHANNEL, partitionStore.PARTITION_CHANNEL, RUN_NOW_CHANNEL],
      onNotification: (channel, payload) => this.notified(channel, payload)
    })
    this.ctx = {
      settings: this.settings,
      log: this.log,
      lock: this.lock,
      batcher: this.batcher,
      partitions: 0,
      partitionOfId: new Map(),
      epoch: 0,
      joined: false,
      running: () => this.phase === 'running',
      requestReconcile: (ids) => this.requestReconcile(ids)
    }
    this.runners = new PartitionRunners(this.ctx)
    this.ownership = new PartitionOwnership(this.ctx, this.runners)
    this.control = new ReaktorControl(this.ctx, this.runners)
  }

  /** True after start() found no other live node and applied the restart rules. */
  get coldStart (): boolean | undefined {
    return this.coldStarted
  }

  /** The cluster's partition count (known once started). */
  get partitions (): number {
    return this.ctx.partitions
  }

  /** The partition of a registered reaktor (undefined before start or for unknown ids). */
  partitionOfReaktor (reaktorId: string): number | undefined {
    return this.ctx.partitionOfId.get(reaktorId)
  }

  /** Ids this node currently owns (and times). */
  ownedReaktorIds (): string[] {
    return this.runners.ownedIds()
  }

  /** How many reaktors this node owns now. */
  get ownedCount (): number {
    return this.runners.ownedCount()
  }

  /** Partitions whose lock this node holds. */
  heldPartitions (): number[] {
    return [...this.runners.held.keys()].sort((a, b) => a - b)
  }

  /** The fair share as of the last reconcile pass. */
  get ownershipShare (): OwnershipShare & { owned: number } {
    return { ...this.ownership.lastShare, held: this.runners.held.size, owned: this.runners.ownedCount() }
  }

  /** The floor of every interval this node applies (what status shows as effectiveInterval). */
  get minIntervalMs (): number {
    return this.settings.minIntervalMs
  }

  /** Started and its lock connection is up: it can run reaktors (for /readyz). */
  get connected (): boolean {
    return this.phase === 'running' && this.lock.alive
  }

  /** What keeps this node from owning its share (a full lock table, an earlier-version node), for /readyz. */
  get problem (): string | undefined {
    return this.ownership.problem
  }

  /** Times PostgreSQL refused a lock (metrics, tests). */
  get lockRefusals (): number {
    return this.ownership.lockRefusals
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
      this.ctx.partitions = await partitionStore.ensurePartitions(this.settings.db, this.settings.partitions)
      for (const id of this.settings.reaktors.keys()) this.ctx.partitionOfId.set(id, partitionOf(id, this.ctx.partitions))
      await this.lock.connect()
      await this.ownership.warnIfLockTableSmall()
      await this.ownership.publish()
      await this.lock.holdProtocol()
      const cold = await this.probeColdStart()
      // Still holding the exclusive lock: nodes booting meanwhile wait in holdSharedMembership
      // and see a live cluster, so the restart rules are applied exactly once.
      const boot = [...this.settings.reaktors].map(([id, r]) => ({
        reaktorId: id, interval: r.registration.interval, autoStart: r.registration.autoStart === true, partition: this.ctx.partitionOfId.get(id)!
      }))
      const applied = await store.applyBootRules(this.settings.bulkDb ?? this.settings.db, boot, new Date(this.settings.now()), cold)
      if (applied.stoppedIds.length > 0) await recordAudit(this.log, this.settings.auditWriter, { action: 'polling.restart_reset', targets: applied.stoppedIds, actor: null, address: null, node: this.nodeId, details: { reason: 'cluster cold start: autoStart is false' } })
      await this.lock.holdSharedMembership()
      if (cold) await this.lock.releaseExclusiveMembership()
      const legacy = await partitionStore.readLegacyNodes(this.settings.db, 250)
      if (legacy.length > 0) throw new LegacyNodeRunning(legacy)
      // Rows inserted as running: their partition's holder (maybe another node) starts them now.
      if (!cold) await store.announce(this.settings.db, applied.startedIds)
      this.coldStarted = cold
      if (this.phase !== 'starting') throw new Error('scheduler stopped while starting')
      if (!this.lock.alive) throw new Error('the scheduler lock connection was lost while starting')
      this.ctx.joined = true
      this.log.info({ nodeId: this.nodeId, coldStart: cold, reaktors: this.settings.reaktors.size, partitions: this.ctx.partitions, inserted: applied.inserted, stopped: applied.stoppedIds.length },
        cold ? 'scheduler started: cluster cold start, restart rules applied' : 'scheduler started: joined a live cluster')
    } catch (err) {
      this.phase = 'stopped'
      await this.lock.close()
      throw err
    }
    this.phase = 'running'
    void applyWaitingChanges(this.ctx, this.runners, this.ownership).catch((err) => this.log.error({ err }, 'app switches that came during the start could not be applied'))
    this.batcher.startPruning()
    this.armTick()
    this.requestReconcile()
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
    if (!cold || this.settings.coldStartSettleMs <= 0 || !(await store.othersOwnedRunning(this.settings.db, this.nodeId))) return cold
    const deadline = performance.now() + this.settings.coldStartSettleMs
    this.log.info({ nodeId: this.nodeId, waitMs: this.settings.coldStartSettleMs },
      'no live node, but other nodes did not shut down cleanly: waiting for them to reconnect before a cold start')
    while (cold && this.phase === 'starting' && performance.now() < deadline) {
      // Not held while waiting: a reconnecting node takes the membership lock shared, without blocking.
      await this.lock.releaseExclusiveMembership()
      await new Promise((resolve) => setTimeout(resolve, Math.max(1, Math.min(250, deadline - performance.now()))))
      cold = await this.lock.tryExclusiveMembership()
    }
    return cold
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
    const partitions = [...this.runners.held.keys()]
    this.halting = { at: performance.now(), partitions, runs: this.runners.haltForShutdown() }
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
    const all = Promise.allSettled([...halting.runs.map((r) => r.done), this.worker])
    const graceMs = Math.max(0, this.settings.shutdownGraceMs - (performance.now() - halting.at))
    let graceTimer: NodeJS.Timeout | undefined
    const inTime = await Promise.race([
      all.then(() => true),
      new Promise<boolean>((resolve) => { graceTimer = setTimeout(() => resolve(false), graceMs) })
    ])
    clearTimeout(graceTimer)
    // A run that ignores its signal may still be going: its partition's lock is kept until it
    // settles or the process exits (and the session with it), or another node would start the
    // same reaktor beside it. Only partitions this session still holds can be kept.
    const stuck = halting.runs.filter((r) => !r.settled && halting.partitions.includes(r.partition))
    const kept = [...new Set(stuck.map((r) => r.partition))]
    const released = halting.partitions.filter((p) => !kept.includes(p))
    if (!inTime) {
      this.log.warn({ graceMs: this.settings.shutdownGraceMs, reaktors: stuck.map((r) => r.reaktorId), partitions: kept },
        'runs still in flight after the shutdown grace period; their partitions stay locked until those runs settle or the process exits')
    }
    await this.batcher.close()
    // Everything naming this node, not only what it holds now (a takeover cut short by the
    // shutdown): a clean shutdown leaves no owner behind, which tells a clean stop from a crash.
    await store.releaseOwner(this.settings.db, this.nodeId).catch((err) => this.log.warn({ err }, 'could not clear owner at shutdown'))
    this.runners.held.clear()
    if (kept.length === 0) await this.lock.close()
    else {
      await this.lock.markLeaving().then(async () => await this.lock.unlock(released)).catch((err) => this.log.warn({ err }, 'could not release partitions at shutdown'))
      void Promise.allSettled(stuck.map((r) => r.done)).then(async () => await this.lock.releaseAndClose(kept))
    }
    // Tell the other nodes to take these over now, not at their next periodic pass (a rolling
    // restart then costs no interval).
    await partitionStore.announcePartitions(this.settings.db, released).catch(() => {})
    this.phase = 'stopped'
    this.log.info({ nodeId: this.nodeId, released: released.length, kept: kept.length }, 'scheduler stopped')
  }

  /**
   * Crash simulation for tests: abort everything, drop the unflushed batch, and close the lock
   * connection without unlocking or writing anything else.
   */
  terminate (): void {
    this.phase = 'stopped'
    this.clearTimers()
    for (const runner of this.runners.all()) void runner.halt('terminated')
    this.runners.held.clear()
    this.batcher.discard()
    this.lock.destroy()
  }

  /** Writes `running` (before it is acknowledged) and reconciles at once. False: already running. */
  async startReaktor (reaktorId: string): Promise<boolean> {
    return await this.control.start(reaktorId)
  }

  /** Writes `stopped` (before it is acknowledged); an owned run is aborted at once. False: already stopped. */
  async stopReaktor (reaktorId: string): Promise<boolean> {
    return await this.control.stop(reaktorId)
  }

  /** Starts or stops many in one transaction; ids not registered here are reported, not written. */
  async controlReaktors (action: ControlAction, reaktorIds: readonly string[]): Promise<ControlOutcome[]> {
    return await this.control.bulk(action, reaktorIds)
  }

  /** The map of registrations changed under the scheduler (an app version switch): see registrations.ts. */
  async registrationsChanged (diff: RegistrationChange): Promise<void> {
    await applyRegistrationChange(this.ctx, this.runners, this.ownership, diff)
  }

  /** Run now, by its owner wherever that is (run-now.ts), written before it is acknowledged. False: stopped. */
  async runReaktor (reaktorId: string): Promise<boolean> {
    return await this.control.run(reaktorId)
  }

  // ---------------------------------------------------------------- ownership

  private notified (channel: string, payload: string): void {
    // A partition was given back: an under-share node takes it now, not at its next tick.
    if (channel === partitionStore.PARTITION_CHANNEL) return this.requestReconcile()
    if (channel === RUN_NOW_CHANNEL) return this.runners.runNow(...parseRunRequest(payload))
    if (channel !== store.NOTIFY_CHANNEL) return
    // Any state change moves the running counts (the weights of even spreading).
    this.ownership.noteStateChange()
    this.requestReconcile([payload])
  }

  /** Queues a reconcile of some ids (or a full pass); one worker runs them in order, never concurrently. */
  requestReconcile (ids?: Iterable<string>): void {
    if (this.phase !== 'running') return
    if (ids === undefined) this.dirtyAll = true
    else for (const id of ids) if (this.settings.reaktors.has(id)) this.dirty.add(id)
    if (this.worker !== undefined || (!this.dirtyAll && this.dirty.size === 0)) return
    this.worker = (async () => {
      try {
        while (this.phase === 'running' && (this.dirtyAll || this.dirty.size > 0)) {
          const full = this.dirtyAll
          const ids = [...this.dirty]
          this.dirtyAll = false
          this.dirty.clear()
          try {
            if (full) await this.ownership.fullPass()
            if (ids.length > 0) await this.ownership.idsPass(ids)
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

  /**
   * The lock connection broke: every lock is gone with it, so every run stops NOW (another node
   * may take these partitions over at any moment). Then reconnect and compete again.
   */
  private fence (err: unknown): void {
    this.ctx.epoch++
    this.ctx.joined = false
    this.ownership.onFence()
    const aborted = this.runners.haltAll('lock connection lost')
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
    this.ctx.joined = false
    try {
      await this.lock.connect()
      await this.ownership.publish()
      // A reconnect is never a cold start: the restart rules belong to boot only.
      await this.lock.holdProtocol()
      await this.lock.holdSharedMembership()
      this.reconnectDelay = this.settings.reconnectMinMs
      this.log.info({ nodeId: this.nodeId, pid: this.lock.pid }, 'scheduler lock connection re-established; competing for ownership again')
      if (this.phase !== 'running') { await this.lock.close(); return }
      this.ctx.joined = true
      this.requestReconcile()
    } catch (err) {
      this.reconnectDelay = Math.min(this.reconnectDelay * 2, this.settings.reconnectMaxMs)
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
    }, this.settings.reconcileIntervalMs)
  }

  private clearTimers (): void {
    if (this.tickTimer !== undefined) clearTimeout(this.tickTimer)
    if (this.reconnectTimer !== undefined) clearTimeout(this.reconnectTimer)
    this.tickTimer = undefined
    this.reconnectTimer = undefined
  }
}
