import { performance } from 'node:perf_hooks'
import type { Kysely } from 'kysely'
import { MIN_POLLING_INTERVAL_MS } from '../apps/registry.js'
import type { RegisteredPollingReaktor } from '../apps/types.js'
import type { Database, PollingReaktorRow } from '../db/schema.js'
import { RunResultBatcher } from './batcher.js'
import { formatDuration } from '../duration.js'
import { LockConnection } from './lock-connection.js'
import type { SchedulerLogger } from './logger.js'
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
  /** How long stop() waits for in-flight runs after aborting their signals. Default 10 s. */
  shutdownGraceMs?: number
  /** Floor of every interval (spec: 3 s). Tests lower it. */
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
   * A running reaktor that no node has held for this long is taken by any node, even beyond its
   * fair share (liveness when nodes register different apps). Default 3 s.
   */
  orphanGraceMs?: number
  /**
   * Ownership policy hook, asked before competing for a running reaktor this node does not own,
   * on top of the built-in even spreading; default: always. A node that declines simply leaves the
   * lock to another node; correctness never depends on this answer, only on the advisory lock.
   */
  wantsOwnership?: (reaktorId: string, scheduler: Scheduler) => boolean
  /** Told of every finished run on this node (metrics). Must not throw; a throw is ignored. */
  onRunEnd?: (run: RunEnd) => void
  /**
   * At boot, when no node holds the membership lock but rows still name other nodes as owners of
   * running reaktors (those nodes did not shut down cleanly: crashed, or only disconnected by a
   * database restart), wait up to this long for one of them to reconnect before calling it a cold
   * start. Default 6 s: the reconnect backoff's ceiling (5 s + 20 % jitter).
   */
  coldStartSettleMs?: number
  /** Tests only: awaited inside a reconcile pass, to widen its race windows on purpose. */
  reconcileHook?: (step: 'locked' | 'claimed', reaktorIds: readonly string[]) => void | Promise<void>
}

/** One finished run, as the `onRunEnd` observer sees it. */
export interface RunEnd {
  reaktorId: string
  outcome: RunOutcome
  durationMs: number
}

/** The fair-share arithmetic of the last reconcile pass (for logs, metrics and tests). */
export interface OwnershipShare {
  /** Live nodes: sessions holding the cluster-membership lock. */
  members: number
  /** Running reaktors registered on this node. */
  running: number
  /** ceil(running / members): what this node takes at most (orphans aside). */
  share: number
  /** Reaktors this node owns now. */
  owned: number
}

/** What status and list show (DESIGN.md section 4); timestamps as Dates, the route formats them. */
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

interface Owned {
  reaktorId: string
  key: number
  runner: ReaktorRunner
  /** Lock-connection generation the lock was taken on. */
  epoch: number
}

/** A reaktor let go of whose last run has not settled yet; its lock is kept until then. */
interface Draining {
  done: Promise<void>
  runner: ReaktorRunner
}

type Phase = 'idle' | 'starting' | 'running' | 'stopping' | 'stopped'

/**
 * The distributed timer (DESIGN.md sections 4 and 5). One instance per node.
 *
 * Ownership: a reaktor runs only on the node whose dedicated lock connection holds its session
 * advisory lock `(REAKTOR_LOCK_NAMESPACE, hashtext(id))`. A reconcile pass (every
 * `reconcileIntervalMs`, and at once for ids announced by LISTEN/NOTIFY or changed through this
 * node) compares the stored state with what this node owns: it competes for running reaktors it
 * does not own and releases owned ones that are stopped (or were restarted: a new `state_version`).
 * A released reaktor keeps its lock until its aborted run has settled, so runs never overlap.
 *
 * Even spreading: with k live nodes (holders of the cluster-membership lock) and n running
 * reaktors, a node competes only while it owns fewer than ceil(n/k), and in a full pass hands the
 * surplus over — between runs: the runner finishes its in-flight run without an abort, its result
 * is flushed, then the lock is released and announced, so an under-share node takes it at once
 * and continues from the stored next run. Reaktors no node has held for `orphanGraceMs` are taken
 * by anyone (liveness before balance).
 *
 * Fencing: when the lock connection breaks, every owned run is aborted at once and nothing new
 * starts; only then does the node reconnect and compete again. Before each run the runner checks
 * that the connection answered recently (else it pings it first).
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
  private readonly lock: LockConnection
  private readonly batcher: RunResultBatcher

  private phase: Phase = 'idle'
  private keys = new Map<string, number>()
  /** Reaktors this node owns and times. */
  private readonly owned = new Map<string, Owned>()
  /** Released or fenced reaktors whose last run has not settled yet: not competed for meanwhile. */
  private readonly draining = new Map<string, Draining>()
  /** performance.now() since which a running reaktor has been seen held by nobody (full passes). */
  private readonly unheldSince = new Map<string, number>()
  /** Orphans taken beyond the fair share: not handed over again before this performance.now(). */
  private readonly keepUntil = new Map<string, number>()
  private lastShare: OwnershipShare = { members: 0, running: 0, share: 0, owned: 0 }
  /** Advisory keys this session holds → the owned ids using them (colliding ids share a key). */
  private readonly heldKeys = new Map<number, Set<string>>()
  /** Grows each time the lock connection is lost: locks taken under an older epoch are gone. */
  private epoch = 0
  private readonly dirty = new Set<string>()
  private dirtyAll = false
  private worker: Promise<void> | undefined
  private tickTimer: NodeJS.Timeout | undefined
  private reconnectTimer: NodeJS.Timeout | undefined
  private reconnectDelay: number
  private coldStarted: boolean | undefined
  private readonly coldStartSettleMs: number
  private readonly onRunEnd: ((run: RunEnd) => void) | undefined
  private readonly reconcileHook: SchedulerOptions['reconcileHook']
  /**
   * The newest `state_version` this node wrote (start/stop) per reaktor: a runner is never started
   * from an older read of the row, i.e. a read that predates a stop this node acknowledged.
   */
  private readonly writtenVersion = new Map<string, bigint>()
  private stopping: Promise<void> | undefined
  /** What stopScheduling() aborted: awaited (up to the grace period) by stop(). */
  private halting: { at: number, owned: string[], settled: Array<Promise<unknown>> } | undefined

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
    this.reconnectDelay = this.reconnectMinMs
    this.coldStartSettleMs = opts.coldStartSettleMs ?? 6000
    this.onRunEnd = opts.onRunEnd
    this.reconcileHook = opts.reconcileHook
    if (opts.wantsOwnership !== undefined) this.wantsOwnership = (id) => opts.wantsOwnership!(id, this)
    this.batcher = new RunResultBatcher({ db: this.db, intervalMs: opts.flushIntervalMs ?? 200, log: this.log })
    this.lock = new LockConnection({
      url: opts.databaseUrl,
      applicationName: `reaktor-scheduler ${opts.nodeId}`.slice(0, 63),
      queryTimeoutMs: opts.lockQueryTimeoutMs ?? 5000,
      onLost: (err) => this.fence(err),
      onNotification: (id) => this.requestReconcile([id])
    })
  }

  /** Extra policy on top of even spreading; default: no further restriction. */
  private wantsOwnership: (reaktorId: string) => boolean = () => true

  effectiveIntervalMs (reaktor: RegisteredPollingReaktor): number {
    return Math.max(reaktor.intervalMs, this.minIntervalMs)
  }

  /** True after start() found no other live node and applied the restart rules. */
  get coldStart (): boolean | undefined {
    return this.coldStarted
  }

  /** Ids this node currently owns (and times). */
  ownedReaktorIds (): string[] {
    return [...this.owned.keys()].sort()
  }

  /** The fair share as of the last reconcile pass. */
  get ownershipShare (): OwnershipShare {
    return { ...this.lastShare, owned: this.owned.size }
  }

  /** Started and its lock connection is up: it can run reaktors (for /readyz). */
  get connected (): boolean {
    return this.phase === 'running' && this.lock.alive
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
      this.keys = await store.lockKeys(this.db, [...this.reaktors.keys()])
      await this.lock.connect()
      const cold = await this.probeColdStart()
      // Still holding the exclusive lock: nodes booting meanwhile wait in holdSharedMembership
      // and see a live cluster, so the restart rules are applied exactly once.
      const boot = [...this.reaktors].map(([id, r]) => ({ reaktorId: id, interval: r.registration.interval, autoStart: r.registration.autoStart === true }))
      const applied = await store.applyBootRules(this.db, boot, new Date(this.now()), cold)
      await this.lock.holdSharedMembership()
      if (cold) await this.lock.releaseExclusiveMembership()
      this.coldStarted = cold
      if (this.phase !== 'starting') throw new Error('scheduler stopped while starting')
      this.log.info({ nodeId: this.nodeId, coldStart: cold, reaktors: this.reaktors.size, ...applied },
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
   * Cold-start probe: the exclusive membership lock (held on return when true). When no node holds
   * it but rows name other nodes as owners of running reaktors, those nodes did not shut down
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
    const owned = [...this.owned.keys()]
    const settled: Array<Promise<unknown>> = [...this.owned.values(), ...this.draining.values()].map(async (own) => await own.runner.halt('shutdown'))
    this.owned.clear()
    settled.push(...[...this.draining.values()].map(async (d) => await d.done))
    this.halting = { at: performance.now(), owned, settled }
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
    const ownedIds = halting.owned
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
    // Every row naming this node, not only those owned now (a claim cut short by the shutdown): a
    // clean shutdown leaves no owner behind, which is what tells a clean cluster stop from a crash.
    await store.releaseOwner(this.db, this.nodeId, [...this.reaktors.keys()]).catch((err) => this.log.warn({ err }, 'could not clear owner at shutdown'))
    this.heldKeys.clear()
    await this.lock.close()
    // The locks are gone with the session: tell the other nodes to take these over now, not at
    // their next periodic pass (a rolling restart then costs no interval).
    await store.announce(this.db, ownedIds).catch(() => {})
    this.phase = 'stopped'
    this.log.info({ nodeId: this.nodeId, released: ownedIds.length }, 'scheduler stopped')
  }

  /**
   * Crash simulation for tests: abort everything, drop the unflushed batch, and close the lock
   * connection without unlocking or writing anything else.
   */
  terminate (): void {
    this.phase = 'stopped'
    this.clearTimers()
    for (const own of [...this.owned.values(), ...this.draining.values()]) void own.runner.halt('terminated')
    this.owned.clear()
    this.heldKeys.clear()
    this.batcher.discard()
    this.lock.destroy()
  }

  /** Writes `running` (before it is acknowledged) and reconciles at once. False: already running. */
  async startReaktor (reaktorId: string): Promise<boolean> {
    const reaktor = this.registered(reaktorId)
    const { changed, version } = await store.writeStart(this.db, reaktorId, reaktor.registration.interval, new Date(this.now()))
    this.noteWrittenVersion(reaktorId, version)
    this.requestReconcile([reaktorId])
    return changed
  }

  /** Writes `stopped` (before it is acknowledged); an owned run is aborted at once. False: already stopped. */
  async stopReaktor (reaktorId: string): Promise<boolean> {
    const reaktor = this.registered(reaktorId)
    const { changed, version } = await store.writeStop(this.db, reaktorId, reaktor.registration.interval, new Date(this.now()))
    // Synchronously with the answer: a reconcile pass that read the row before this stop can no
    // longer start a runner from that read (own() refuses older versions).
    this.noteWrittenVersion(reaktorId, version)
    const own = this.owned.get(reaktorId)
    if (own !== undefined) this.release(own)
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

  /** Queues a reconcile of some ids (or all); one worker runs them in order, never concurrently. */
  requestReconcile (ids?: Iterable<string>): void {
    if (this.phase !== 'running') return
    if (ids === undefined) this.dirtyAll = true
    else for (const id of ids) if (this.reaktors.has(id)) this.dirty.add(id)
    if (this.worker !== undefined || (!this.dirtyAll && this.dirty.size === 0)) return
    this.worker = (async () => {
      try {
        while (this.phase === 'running' && (this.dirtyAll || this.dirty.size > 0)) {
          const full = this.dirtyAll
          const ids = full ? [...this.reaktors.keys()] : [...this.dirty]
          this.dirtyAll = false
          this.dirty.clear()
          try {
            await this.reconcile(ids, full)
          } catch (err) {
            // The database or the lock connection is gone; the tick (or the reconnect) retries.
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
   * One pass over `ids` (all registered ids in a full pass): release what was stopped, clear stale
   * owners, hand the surplus over (full passes), take running reaktors nobody holds while under the
   * fair share (and orphans regardless).
   */
  private async reconcile (ids: string[], full: boolean): Promise<void> {
    const lockPid = this.lock.pid
    if (!this.lock.alive || lockPid === undefined) return
    const epoch = this.epoch
    const view = await store.readReconcileView(this.db, { ids, owned: [...this.owned.keys()], registered: [...this.reaktors.keys()], lockPid })
    if (epoch !== this.epoch || this.phase !== 'running') return
    const byId = new Map(view.rows.map((r) => [r.reaktorId, r]))

    for (const id of ids) {
      const own = this.owned.get(id)
      if (own === undefined) continue
      const row = byId.get(id)
      // Stopped, or stopped and started again (new version): this run series is over.
      if (row === undefined || row.state !== 'running' || row.version !== own.runner.version) this.release(own)
    }

    // Running, and no other session holds the key: free to take (its node died, was fenced, or
    // handed it over). The view never returns running reaktors another node holds.
    const free = view.rows.filter((r) => r.state === 'running' && !r.heldElsewhere && !this.owned.has(r.reaktorId) && !this.draining.has(r.reaktorId))
    const at = performance.now()
    if (full) {
      const seen = new Set(free.map((r) => r.reaktorId))
      for (const id of this.unheldSince.keys()) if (!seen.has(id)) this.unheldSince.delete(id)
      for (const id of seen) if (!this.unheldSince.has(id)) this.unheldSince.set(id, at)
      for (const [id, until] of this.keepUntil) if (until <= at) this.keepUntil.delete(id)
      // The owner column of a dead or fenced node: cleared (status shows nobody) until taken over.
      const stale = free.filter((r) => r.owner !== null).map((r) => r.reaktorId)
      if (stale.length > 0) await store.clearStaleOwners(this.db, stale)
    }

    const members = Math.max(1, view.members)
    const share = Math.ceil(view.running / members)
    if (share !== this.lastShare.share || members !== this.lastShare.members) {
      this.log.debug({ nodeId: this.nodeId, members, running: view.running, share, owned: this.owned.size }, 'fair share changed')
    }
    this.lastShare = { members, running: view.running, share, owned: this.owned.size }
    // Hand over only when another node has room for it (fewer locks than the share): with nodes
    // that register different apps, a node holding few locks may not run ours at all.
    if (full && this.owned.size > share && view.leastLoaded !== null && view.leastLoaded < share) {
      this.handOverSurplus(Math.min(this.owned.size - share, share - view.leastLoaded))
    }

    const candidates = free.filter((r) => this.keys.has(r.reaktorId) && this.wantsOwnership(r.reaktorId))
    if (candidates.length === 0) return
    const isOrphan = (id: string): boolean => at - (this.unheldSince.get(id) ?? at) >= this.orphanGraceMs
    const orphans = candidates.filter((r) => isOrphan(r.reaktorId)).map((r) => r.reaktorId)
    const acquired = orphans.length > 0 ? await this.acquire(orphans, epoch) : []
    for (const id of acquired) this.keepUntil.set(id, at + 10 * this.orphanGraceMs)
    // Under the share: take what is free, the due ones first, in an order of our own so that nodes
    // competing at the same moment mostly try different keys; lost races are retried at once.
    const others = shuffle(candidates.filter((r) => !isOrphan(r.reaktorId)))
    const now = this.now()
    others.sort((a, b) => Number((a.nextRun?.getTime() ?? 0) > now) - Number((b.nextRun?.getTime() ?? 0) > now))
    let room = share - this.owned.size - acquired.length
    for (let next = 0; room > 0 && next < others.length && epoch === this.epoch;) {
      const batch = others.slice(next, next + room).map((r) => r.reaktorId)
      next += batch.length
      const got = await this.acquire(batch, epoch)
      acquired.push(...got)
      room -= got.length
    }
    if (acquired.length === 0) return
    await this.reconcileHook?.('locked', acquired)

    // Claim under the lock, guarded by the version this pass saw running: a reaktor stopped (or
    // stopped and started again) since that read is not claimed, and its lock is given back. The
    // claim returns the row as it is now (its next run), so no second read is needed.
    const seen = new Map(view.rows.map((r) => [r.reaktorId, r.version]))
    const claimed = new Map((await store.claimOwner(this.db, this.nodeId, acquired.map((id) => ({ reaktorId: id, version: seen.get(id)! }))))
      .map((r) => [r.reaktorId, r]))
    if (epoch !== this.epoch) return
    await this.reconcileHook?.('claimed', [...claimed.keys()])
    if (epoch !== this.epoch) return
    const owned: string[] = []
    const retry: string[] = []
    for (const id of acquired) {
      const row = claimed.get(id)
      if (row === undefined || !this.own(id, row, epoch)) {
        await this.unlockId(id)
        // Changed since this pass read it (e.g. stopped and started again): look again.
        if (row === undefined) retry.push(id)
        continue
      }
      owned.push(id)
    }
    if (retry.length > 0) this.requestReconcile(retry)
    if (owned.length > 0) {
      this.log.info({ nodeId: this.nodeId, reaktorIds: owned.length <= 20 ? owned : undefined, count: owned.length, owned: this.owned.size, share, members },
        'took ownership of polling reaktors')
    }
  }

  /**
   * Gives up `surplus` owned reaktors, between runs: those idle right now first. Ids sharing their
   * key with another owned id (hash collision) and orphans just taken are kept.
   */
  private handOverSurplus (surplus: number): void {
    const at = performance.now()
    const movable = [...this.owned.values()].filter((own) =>
      (this.keepUntil.get(own.reaktorId) ?? 0) <= at && (this.heldKeys.get(own.key)?.size ?? 0) <= 1)
    movable.sort((a, b) => Number(a.runner.running) - Number(b.runner.running))
    for (const own of movable.slice(0, surplus)) this.handOver(own)
  }

  /**
   * Handover: no new run; the in-flight run ends on its own (no abort) and its result is flushed;
   * only then is the owner cleared, the lock released and the release announced, so the next
   * owner (an under-share node, notified at once) continues from the stored next run.
   */
  private handOver (own: Owned): void {
    const id = own.reaktorId
    if (this.owned.get(id) !== own) return
    this.owned.delete(id)
    const current = (): boolean => own.epoch === this.epoch && this.phase === 'running'
    this.drain(own, own.runner.finish().then(async () => {
      if (!current()) return
      await this.batcher.flush().catch((err) => this.log.warn({ err, reaktorId: id }, 'handover: could not persist the last run result'))
      await store.releaseOwner(this.db, this.nodeId, [id])
      if (!current()) return
      await this.unlockId(id)
      await store.announce(this.db, [id])
      this.log.info({ nodeId: this.nodeId, reaktorId: id }, 'polling reaktor handed over between runs (even spreading)')
    }).catch((err) => {
      this.log.warn({ err, reaktorId: id }, 'could not hand over polling reaktor')
    }))
  }

  /**
   * Keeps a runner that no longer owns its reaktor in `draining` until `work` (stopping it, then
   * releasing or handing over its lock) has settled, then lets reconcile look at the id again.
   */
  private drain (own: Owned, work: Promise<void>): void {
    const id = own.reaktorId
    const done: Promise<void> = work.finally(() => {
      if (this.draining.get(id)?.done === done) this.draining.delete(id)
      this.requestReconcile([id])
    })
    this.draining.set(id, { done, runner: own.runner })
  }

  /** Takes the locks of ids not owned yet; returns the ids whose key this session now holds. */
  private async acquire (ids: string[], epoch: number): Promise<string[]> {
    const got: string[] = []
    const wanted = new Map<number, string[]>()
    for (const id of ids) {
      const key = this.keys.get(id)!
      const held = this.heldKeys.get(key)
      // Session locks stack: taking a held key again would need two unlocks to release it.
      if (held !== undefined) {
        held.add(id)
        got.push(id)
      } else {
        wanted.set(key, [...(wanted.get(key) ?? []), id])
      }
    }
    const granted = await this.lock.tryLocks([...wanted.keys()])
    if (epoch !== this.epoch) return []
    for (const key of granted) {
      const idsOfKey = wanted.get(key)!
      this.heldKeys.set(key, new Set(idsOfKey))
      got.push(...idsOfKey)
    }
    return got
  }

  /** Drops id from its key; the key is unlocked when no owned id uses it any more. */
  private async unlockId (id: string): Promise<void> {
    const key = this.keys.get(id)
    if (key === undefined) return
    const held = this.heldKeys.get(key)
    if (held === undefined) return
    held.delete(id)
    if (held.size > 0) return
    this.heldKeys.delete(key)
    const notHeld = await this.lock.unlock([key])
    if (notHeld.length > 0) this.log.error({ reaktorId: id, key }, 'advisory lock was not held at release (bookkeeping bug)')
  }

  /**
   * Starts timing a reaktor whose lock this node holds and whose claim succeeded. Refused (false)
   * when the scheduler is no longer running, the id is owned already, or this node has since
   * written a newer version of it (a stop acknowledged after the claim: the claim is stale).
   */
  private own (id: string, row: store.ScheduleRow, epoch: number): boolean {
    if (this.phase !== 'running' || epoch !== this.epoch || this.owned.has(id)) return false
    if (BigInt(row.version) < (this.writtenVersion.get(id) ?? -1n)) {
      this.log.debug({ reaktorId: id, version: row.version }, 'claim predates a start/stop written by this node; not owned')
      return false
    }
    const reaktor = this.reaktors.get(id)!
    const runner: ReaktorRunner = new ReaktorRunner({
      reaktorId: id,
      reaktor,
      effectiveIntervalMs: this.effectiveIntervalMs(reaktor),
      version: row.version,
      consecutiveFailures: row.consecutiveFailures,
      nodeId: this.nodeId,
      log: this.runLog,
      now: this.now,
      mayRun: async () => await this.mayRun(id, runner),
      onRunEnd: (record, outcome, durationMs) => {
        this.batcher.record(record)
        try {
          this.onRunEnd?.({ reaktorId: id, outcome, durationMs })
        } catch (err) {
          this.log.warn({ err, reaktorId: id }, 'onRunEnd observer failed')
        }
      }
    })
    this.owned.set(id, { reaktorId: id, key: this.keys.get(id)!, runner, epoch })
    this.unheldSince.delete(id)
    this.log.debug({ reaktorId: id, nextRun: row.nextRun, version: row.version }, 'polling reaktor owned by this node')
    // Continue from the stored next run: due or overdue means exactly one run now.
    runner.start(row.nextRun?.getTime() ?? null)
    return true
  }

  /** Stops an owned runner; its lock is released once its in-flight run has settled. */
  private release (own: Owned): void {
    if (this.owned.get(own.reaktorId) !== own) return
    this.owned.delete(own.reaktorId)
    this.drain(own, own.runner.halt('stopped').then(async () => {
      if (own.epoch === this.epoch && this.phase === 'running') await this.unlockId(own.reaktorId)
    }).catch((err) => {
      this.log.warn({ err, reaktorId: own.reaktorId }, 'could not release polling reaktor lock')
    }))
    this.log.debug({ reaktorId: own.reaktorId }, 'polling reaktor released by this node')
  }

  /** Before each run: still the owner, and the lock connection answered recently (else ping it). */
  private async mayRun (id: string, runner: ReaktorRunner): Promise<boolean> {
    if (this.phase !== 'running' || this.owned.get(id)?.runner !== runner || !this.lock.alive) return false
    if (performance.now() - this.lock.lastOkAt <= this.lockCheckMaxAgeMs) return true
    return await this.lock.ping() && this.owned.get(id)?.runner === runner
  }

  /**
   * The lock connection broke: every lock is gone with it, so every run stops NOW (another node
   * may take these reaktors over at any moment). Then reconnect and compete again.
   */
  private fence (err: unknown): void {
    this.epoch++
    this.heldKeys.clear()
    const fenced = [...this.owned.values()]
    this.owned.clear()
    // Handovers in progress lost their lock too: their run is aborted like the others.
    for (const draining of this.draining.values()) void draining.runner.halt('lock connection lost')
    for (const own of fenced) this.drain(own, own.runner.halt('lock connection lost'))
    if (this.phase !== 'running' && this.phase !== 'starting') return
    this.log.error({ err, nodeId: this.nodeId, aborted: fenced.map((o) => o.reaktorId) }, 'scheduler lock connection lost: all runs aborted (fencing); reconnecting')
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
    if (this.phase !== 'running' || this.lock.alive) return
    try {
      await this.lock.connect()
      // A reconnect is never a cold start: the restart rules belong to boot only.
      await this.lock.holdSharedMembership()
      this.reconnectDelay = this.reconnectMinMs
      this.log.info({ nodeId: this.nodeId, pid: this.lock.pid }, 'scheduler lock connection re-established; competing for ownership again')
      if (this.phase !== 'running') { await this.lock.close(); return }
      this.requestReconcile()
    } catch (err) {
      this.reconnectDelay = Math.min(this.reconnectDelay * 2, this.reconnectMaxMs)
      this.log.warn({ err, retryInMs: this.reconnectDelay }, 'scheduler lock connection: reconnect failed')
      this.lock.destroy()
      this.scheduleReconnect()
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

/** Fisher–Yates, on a copy. */
function shuffle<T> (items: readonly T[]): T[] {
  const out = [...items]
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1))
    ;[out[i], out[j]] = [out[j], out[i]]
  }
  return out
}
