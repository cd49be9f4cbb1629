import { createHash } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { Handovers } from './handover.js'
import { isResourceRefusal, LockRefused } from './ownership/lock-connection.js'
import { LegacyNodeRunning } from './options.js'
import { planOwnership, type ClusterView, type OwnershipShare } from './ownership/partitions.js'
import type { PartitionRunners, SchedulerContext } from './partition-runners.js'
import * as partitionStore from './ownership/partition-store.js'
import * as store from './reaktor-store.js'

/** Running reaktors per partition are re-counted at least this often (and at once after a state change). */
const CENSUS_MAX_AGE_MS = 10_000
const LOCK_REFUSAL_MAX_BACKOFF_MS = 60_000
/** Partition locks taken per statement: after a refusal, at most this many were taken in vain. */
const LOCK_CHUNK = 64
/** Partitions given back after a refusal, so that PostgreSQL keeps room for other sessions' locks. */
const LOCK_HEADROOM = 64

/**
 * Which partitions this node holds. A full pass (every `reconcileIntervalMs`, and at once when a
 * partition is announced free) reads pg_locks and the running reaktors per partition and plans
 * (partitions.ts): take free partitions while under the fair share, hand the surplus over between
 * runs. A per-id pass (ids announced by LISTEN/NOTIFY or changed through this node) starts and
 * stops the runners of the held partitions. Also: PostgreSQL refusing locks (a full lock table),
 * nodes of the previous version, and nodes that register different reaktors.
 */
export class PartitionOwnership {
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
  /** Sorted advertised ids and their fingerprint, published for the other nodes. */
  private registeredIds: string[] = []
  private fingerprint = ''
  /** Clusters whose nodes register different reaktors: the registrations of the other fingerprints. */
  private readonly registeredByFingerprint = new Map<string, Set<string>>()
  private partialRunning: { key: string, byPartition: Map<number, string[]> } | undefined
  private legacy: number[] = []
  /** Membership holders without the protocol mark in the last pass (confirmed by the next one). */
  private legacySeen = new Set<number>()
  private refusal: { since: number, retryAt: number, delayMs: number, message: string } | undefined
  /** The even-spreading arithmetic of the last full pass. */
  lastShare: OwnershipShare = { members: 0, running: 0, share: 0, partitionShare: 0, load: 0, held: 0 }
  /** Times PostgreSQL refused a lock (metrics, tests). */
  lockRefusals = 0

  private readonly handovers: Handovers

  constructor (private readonly ctx: SchedulerContext, private readonly runners: PartitionRunners) {
    this.handovers = new Handovers(ctx, runners)
    this.advertise()
  }

  /** Takes the ids to advertise (what this node registers, less what it runs an old version of). */
  private advertise (): boolean {
    const ids = [...(this.ctx.settings.advertisedIds?.() ?? this.ctx.settings.reaktors.keys())].sort()
    const fingerprint = createHash('sha256').update(ids.join('\n')).digest('base64url')
    if (fingerprint === this.fingerprint) return false
    this.registeredIds = ids
    this.fingerprint = fingerprint
    return true
  }

  /**
   * The registrations changed (an app version switch): publishes what this node now advertises,
   * and the next full pass works out eligibility and the running counts afresh.
   */
  async registrationsChanged (): Promise<void> {
    this.censusDirty = true
    this.partialRunning = undefined
    if (!this.advertise() || !this.ctx.lock.alive) return
    await this.publish()
  }

  /**
   * What keeps this node from owning its share, in one line (for /readyz and the logs): a lock
   * refused by PostgreSQL, or a node of the previous version on the same database.
   */
  get problem (): string | undefined {
    if (this.legacy.length > 0) return new LegacyNodeRunning(this.legacy).message
    return this.refusal?.message
  }

  /** Tells the other nodes what this one registers (keyed by its lock session), before it joins. */
  async publish (): Promise<void> {
    await partitionStore.publishNode(this.ctx.settings.db, { pid: this.ctx.lock.pid!, nodeId: this.ctx.settings.nodeId, fingerprint: this.fingerprint, registered: this.registeredIds })
  }

  /**
   * PostgreSQL's shared lock table has about max_locks_per_transaction x (max_connections +
   * max_prepared_transactions) entries for every session together; say so at start when the
   * partition locks alone would take half of it.
   */
  async warnIfLockTableSmall (): Promise<void> {
    const { rows } = await this.ctx.lock.query<{ slots: number }>(`select current_setting('max_locks_per_transaction')::int *
      (current_setting('max_connections')::int + current_setting('max_prepared_transactions')::int) as slots`)
    const slots = rows[0]?.slots ?? Number.POSITIVE_INFINITY
    if (this.ctx.partitions * 2 > slots) {
      this.ctx.log.warn({ partitions: this.ctx.partitions, lockTableSlots: slots, setting: 'max_locks_per_transaction' },
        `${this.ctx.partitions} partitions take more than half of this PostgreSQL server's lock table (about ${slots} entries for all sessions): raise max_locks_per_transaction, or use fewer PARTITIONS for a new cluster`)
    }
  }

  /** A start or stop was announced: the running counts (the weights of even spreading) moved. */
  noteStateChange (): void {
    this.censusDirty = true
    this.partialRunning = undefined
  }

  /** The lock connection is gone: so is every lock, and with it the census is stale. */
  onFence (): void {
    this.handovers.onFence()
    this.censusDirty = true
  }

  /** Start/stop of some ids (notified, or through this node): only those of held partitions matter here. */
  async idsPass (ids: string[]): Promise<void> {
    if (!this.ctx.joined || !this.ctx.lock.alive) return
    // Ids of held partitions, and ids whose runner is settling (a handover's last run is aborted
    // by a stop through any node, not only through this one).
    const mine = ids.filter((id) => this.runners.heldFor(id) !== undefined || this.runners.draining.has(id))
    if (mine.length === 0) return
    const epoch = this.ctx.epoch
    const rows = await store.readSchedule(this.ctx.settings.db, mine)
    if (epoch !== this.ctx.epoch || !this.ctx.running()) return
    const byId = new Map(rows.map((r) => [r.reaktorId, r]))
    const start: store.ScheduleRow[] = []
    // Stopped, or stopped and started again (a new version): that runner's series is over.
    const over = (row: store.ScheduleRow | undefined, version: string): boolean => row === undefined || row.state !== 'running' || row.version !== version
    for (const id of mine) {
      const row = byId.get(id)
      const settling = this.runners.draining.get(id)?.runner
      if (settling !== undefined && over(row, settling.version)) void settling.halt('stopped')
      const hp = this.runners.heldFor(id)
      const runner = hp?.runners.get(id)
      if (runner !== undefined && over(row, runner.version)) this.runners.releaseRunner(id)
      if (row?.state === 'running' && hp !== undefined && !hp.runners.has(id)) start.push(row)
    }
    await this.startRunners(start, epoch)
  }

  /**
   * Starts runners for running rows read under the partition lock. The rows are read once more
   * right before, like a claim: a reaktor stopped (or stopped and started) in between, through any
   * node, is not started from the first read but looked at again.
   */
  private async startRunners (rows: store.ScheduleRow[], epoch: number): Promise<void> {
    const candidates = rows.filter((r) => this.ctx.settings.reaktors.has(r.reaktorId) && !this.runners.draining.has(r.reaktorId))
    if (candidates.length === 0) return
    await this.ctx.settings.reconcileHook?.('locked', candidates.map((r) => r.reaktorId))
    const again = new Map((await store.readSchedule(this.ctx.settings.db, candidates.map((r) => r.reaktorId))).map((r) => [r.reaktorId, r]))
    if (epoch !== this.ctx.epoch) return
    const ready: store.ScheduleRow[] = []
    const changed: string[] = []
    for (const r of candidates) {
      const now = again.get(r.reaktorId)
      if (now?.version !== r.version) changed.push(r.reaktorId)
      else if (now.state === 'running') ready.push(now)
    }
    if (changed.length > 0) this.ctx.requestReconcile(changed)
    await this.ctx.settings.reconcileHook?.('claimed', ready.map((r) => r.reaktorId))
    if (epoch !== this.ctx.epoch || !this.ctx.running()) return
    for (const row of ready) this.runners.ensureRunner(row)
  }

  /**
   * One full pass: who holds what (pg_locks), the running reaktors per partition (when changed),
   * then the plan: give the surplus back between runs, take free partitions under the share.
   */
  async fullPass (): Promise<void> {
    const me = this.ctx.lock.pid
    if (!this.ctx.joined || !this.ctx.lock.alive || me === undefined) return
    const epoch = this.ctx.epoch
    const view = await partitionStore.readLockView(this.ctx.settings.db)
    // The free partitions of this read were free by now: a session that held one ended before.
    const seenFreeAt = performance.now()
    if (epoch !== this.ctx.epoch || !this.ctx.running()) return
    // Only a session seen without the protocol mark in two passes: one that is releasing its locks
    // (a node shutting down or exiting) can show its membership without the mark for an instant.
    const legacy = view.legacy.filter((pid) => this.legacySeen.has(pid))
    this.legacySeen = new Set(view.legacy)
    if (this.noteLegacy(legacy)) return
    // Locks this session holds that the bookkeeping does not know (a statement that failed after
    // taking some): give them back, or nobody would run those partitions.
    const strays = [...view.holders].filter(([p, pid]) => pid === me && !this.runners.held.has(p) && !this.handovers.releasing.has(p)).map(([p]) => p)
    if (strays.length > 0) {
      this.ctx.log.warn({ partitions: strays.length }, 'releasing partition locks held without bookkeeping')
      await this.ctx.lock.unlock(strays)
      for (const p of strays) view.holders.delete(p)
    }
    // Also when what it advertises changed and publishing it then failed.
    if (view.fingerprints.get(me) !== this.fingerprint) await this.publish()
    if (this.censusDirty || performance.now() - this.censusAt > CENSUS_MAX_AGE_MS) {
      this.censusDirty = false
      this.censusAt = performance.now()
      this.weights = await partitionStore.readCensus(this.ctx.settings.db)
    }
    const members = view.members.includes(me) ? view.members : [...view.members, me]
    const eligible = await this.eligibility(members, view.fingerprints)
    if (epoch !== this.ctx.epoch || !this.ctx.running()) return

    const at = performance.now()
    for (let p = 0; p < this.ctx.partitions; p++) {
      if (view.holders.has(p)) this.freeSince.delete(p)
      else if (!this.freeSince.has(p)) this.freeSince.set(p, at)
    }
    const orphans = new Set<number>()
    for (const [p, since] of this.freeSince) if (at - since >= this.ctx.settings.orphanGraceMs) orphans.add(p)
    for (const [p, until] of this.keepUntil) if (until <= at) this.keepUntil.delete(p)
    const leaving = new Set([...this.runners.held.values()].filter((hp) => hp.leaving).map((hp) => hp.partition))
    for (const p of this.handovers.releasing) leaving.add(p)
    // A partition whose stopped reaktor's run has not settled yet is not handed over now: its
    // other reaktors would wait for that run too.
    const keep = new Set(this.keepUntil.keys())
    for (const hp of this.runners.held.values()) if (hp.settling.size > 0) keep.add(hp.partition)
    const cluster: ClusterView = { me, members, holders: view.holders, weights: this.weights, partitions: this.ctx.partitions, eligible }
    const plan = planOwnership(cluster, { orphans, keep, leaving, shuffle })
    if (plan.share.share !== this.lastShare.share || plan.share.members !== this.lastShare.members) {
      this.ctx.log.debug({ nodeId: this.ctx.settings.nodeId, ...plan.share }, 'fair share changed')
    }
    this.lastShare = plan.share
    for (const p of plan.give) this.handovers.handOver(p)
    const take = plan.take.filter((p) => (this.ctx.settings.wantsOwnership?.(p) ?? true) && !this.runners.held.has(p))
    if (take.length === 0 && this.refusal !== undefined && this.mayAcquire()) {
      // Nothing left to take (others took what this node gave back): no refusal stands.
      this.ctx.log.info({ nodeId: this.ctx.settings.nodeId }, 'no partition lock wanted any more; the lock refusal is over')
      this.refusal = undefined
    }
    if (take.length > 0 && this.mayAcquire()) {
      const lost = await this.acquire(take, epoch, orphans, seenFreeAt)
      // Lost races (another node took some first): look again at once with the new holders.
      if (lost > 0 && epoch === this.ctx.epoch) this.ctx.requestReconcile()
    }
    await this.resyncRows(epoch)
  }

  /**
   * The fallback for lost notifications: the running rows of the held partitions against the
   * runners. A slice per pass, so that every held partition is checked about every 30 s without
   * reading tens of thousands of rows at once (that would hold up every timer of this node).
   */
  private async resyncRows (epoch: number): Promise<void> {
    const held = [...this.runners.held.values()].filter((hp) => !hp.leaving).map((hp) => hp.partition).sort((a, b) => a - b)
    if (held.length === 0) return
    const count = this.resyncAll ? held.length : Math.max(1, Math.ceil(held.length * this.ctx.settings.reconcileIntervalMs / this.ctx.settings.rowsCheckMs))
    this.resyncAll = false
    const first = Math.max(0, held.findIndex((p) => p >= this.resyncCursor))
    const slice = Array.from({ length: Math.min(count, held.length) }, (_v, i) => held[(first + i) % held.length])
    const rows = await store.readRunningIn(this.ctx.settings.db, slice)
    if (epoch !== this.ctx.epoch || !this.ctx.running()) return
    this.resyncCursor = slice[slice.length - 1] + 1
    const running = new Map(rows.map((r) => [r.reaktorId, r]))
    const changed: string[] = []
    for (const p of slice) {
      for (const [id, runner] of this.runners.held.get(p)?.runners ?? []) {
        const row = running.get(id)
        if (row === undefined || row.version !== runner.version) changed.push(id)
      }
    }
    for (const row of rows) if (this.ctx.settings.reaktors.has(row.reaktorId) && this.runners.heldFor(row.reaktorId)?.runners.has(row.reaktorId) !== true) changed.push(row.reaktorId)
    if (changed.length > 0) {
      this.ctx.log.info({ count: changed.length }, 'periodic check found polling reaktors whose start or stop was not seen; reconciling them')
      this.ctx.requestReconcile(changed)
    }
  }

  /**
   * Takes the locks of free partitions (a chunk per statement), claims them (a new generation
   * each) and starts the runners of their running reaktors. Returns how many partitions were lost
   * to another node or not tried because PostgreSQL refused a lock.
   */
  private async acquire (partitions: number[], epoch: number, orphans: ReadonlySet<number>, seenFreeAt: number): Promise<number> {
    let lost = 0
    for (let i = 0; i < partitions.length; i += LOCK_CHUNK) {
      const chunk = partitions.slice(i, i + LOCK_CHUNK)
      let granted: Set<number>
      try {
        granted = await this.ctx.lock.tryLocks(chunk)
      } catch (err) {
        if (!(err instanceof LockRefused)) throw err
        // The statement failed part-way: the locks it took before the refusal are held anyway
        // (session locks ignore the rollback). They were never recorded: give them back.
        const now = await this.ctx.lock.heldPartitions()
        await this.ctx.lock.unlock(chunk.filter((p) => now.has(p) && !this.runners.held.has(p)))
        if (epoch !== this.ctx.epoch) return 0
        this.noteRefusal(err)
        return lost + partitions.length - i
      }
      if (epoch !== this.ctx.epoch) return 0
      lost += chunk.length - granted.size
      try {
        if (granted.size > 0) await this.claim([...granted], epoch, orphans, seenFreeAt)
      } catch (err) {
        // The locks fit, but then the table was too full for the claim's own statements (every
        // writing transaction takes a lock-table slot): the same refusal. A failed claim gave the
        // locks back; partitions claimed before a failed read stay held and are re-checked.
        if (!isResourceRefusal(err) || epoch !== this.ctx.epoch) throw err
        this.noteRefusal(err)
        return lost + partitions.length - i
      }
      if (epoch !== this.ctx.epoch) return 0
    }
    if (this.refusal !== undefined) {
      this.ctx.log.info({ nodeId: this.ctx.settings.nodeId, refusedForMs: Math.round(performance.now() - this.refusal.since) }, 'PostgreSQL grants advisory locks again')
      this.refusal = undefined
    }
    return lost
  }

  /**
   * Records partitions just locked as held (a new generation each) and starts their runners.
   * `seenFreeAt`: when the pass read that they were free.
   */
  private async claim (got: number[], epoch: number, orphans: ReadonlySet<number>, seenFreeAt: number): Promise<void> {
    const at = performance.now()
    try {
      const settling = [...this.runners.draining].filter(([, d]) => d.runner.running && got.includes(d.partition))
      const stillBlocked = settling.filter(([, d]) => d.runner.blocked).map(([id]) => id)
      const claimed = await partitionStore.claimPartitions(this.ctx.settings.db, this.ctx.settings.nodeId, got, stillBlocked, settling.map(([id]) => id))
      if (epoch !== this.ctx.epoch) return
      for (const p of got) {
        const { generation = '0', previousOwner = null } = claimed.get(p) ?? {}
        // Another node's session ended without a release, before this pass read the partition
        // free; that node, if alive, aborts its runs within the fencing grace of the end. (Not
        // the first sighting: it may have been taken and lost again between two passes. This
        // node's own earlier runs are in `draining`, which holds their reaktors back anyway.)
        const orphaned = previousOwner !== null && previousOwner !== this.ctx.settings.nodeId
        const runsFrom = orphaned ? seenFreeAt + this.ctx.settings.fencingGraceMs : 0
        this.runners.held.set(p, { partition: p, generation, epoch, runners: new Map(), leaving: false, settling: new Set(), runsFrom })
        this.freeSince.delete(p)
        if (orphans.has(p)) this.keepUntil.set(p, at + 10 * this.ctx.settings.orphanGraceMs)
      }
    } catch (err) {
      // Not recorded as held: give the locks back, or they would never be released.
      if (epoch === this.ctx.epoch) await this.ctx.lock.unlock(got).catch(() => {})
      throw err
    }
    let rows: store.ScheduleRow[]
    try {
      rows = await store.readRunningIn(this.ctx.settings.db, got)
      if (epoch !== this.ctx.epoch) return
      await this.startRunners(rows, epoch)
    } catch (err) {
      // Held, but runners not started: the next pass compares rows and runners again at once.
      this.resyncAll = true
      throw err
    }
    const unknown = rows.filter((r) => !this.ctx.settings.reaktors.has(r.reaktorId)).length
    if (unknown > 0) this.partialRunning = undefined
    this.ctx.log.info({ nodeId: this.ctx.settings.nodeId, partitions: got.length <= 20 ? got : undefined, count: got.length, reaktors: rows.length - unknown, ...this.lastShare, held: this.runners.held.size },
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
    const delayMs = this.refusal === undefined ? this.ctx.settings.lockRefusalBackoffMs : Math.min(this.refusal.delayMs * 2, LOCK_REFUSAL_MAX_BACKOFF_MS)
    const message = `PostgreSQL refused advisory locks (its shared lock table is full): this node holds ${this.runners.held.size} of ${this.ctx.partitions} partitions, ` +
      `gives back up to ${LOCK_HEADROOM} to leave room for other sessions, and retries with backoff. ` +
      'Raise max_locks_per_transaction on the PostgreSQL server (restart needed), use fewer PARTITIONS for a new cluster, or look for another client holding many locks'
    if (this.refusal === undefined) {
      this.ctx.log.error({ err, nodeId: this.ctx.settings.nodeId, held: this.runners.held.size, partitions: this.ctx.partitions, setting: 'max_locks_per_transaction' }, message)
    } else {
      this.ctx.log.debug({ err, retryInMs: delayMs }, 'advisory locks still refused')
    }
    this.refusal = { since: this.refusal?.since ?? performance.now(), retryAt: performance.now() + delayMs, delayMs, message }
    // A full lock table fails every session of the server (even new connections need a slot):
    // leave room, giving back some partitions, the empty ones first (between runs, like a handover).
    const spare = [...this.runners.held.values()].filter((hp) => !hp.leaving)
      .sort((a, b) => (this.weights.get(a.partition) ?? 0) - (this.weights.get(b.partition) ?? 0))
      .slice(0, LOCK_HEADROOM)
    for (const hp of spare) this.handovers.handOver(hp.partition)
  }

  /** A node of the previous version shares the database: run nothing while it is alive. */
  private noteLegacy (legacy: number[]): boolean {
    const was = this.legacy.length > 0
    this.legacy = legacy
    if (legacy.length === 0) {
      if (was) this.ctx.log.info({ nodeId: this.ctx.settings.nodeId }, 'the earlier-version node is gone; competing for partitions again')
      return false
    }
    if (!was) this.ctx.log.error({ nodeId: this.ctx.settings.nodeId, pids: legacy }, `${new LegacyNodeRunning(legacy).message}; this node gives back its partitions until then`)
    for (const p of this.runners.held.keys()) this.handovers.handOver(p, true)
    return true
  }

  /**
   * Nodes registering the same reaktors (the same fingerprint) can all run every partition: no
   * eligibility then. Otherwise a node can run a partition when it registers each running reaktor
   * of it that not every member registers.
   */
  private async eligibility (members: readonly number[], fingerprints: ReadonlyMap<number, string>): Promise<ClusterView['eligible']> {
    const me = this.ctx.lock.pid!
    const fingerprintOf = (pid: number): string => pid === me ? this.fingerprint : fingerprints.get(pid) ?? this.fingerprint
    if (members.every((pid) => fingerprintOf(pid) === this.fingerprint)) return undefined
    if (!this.registeredByFingerprint.has(this.fingerprint)) this.registeredByFingerprint.set(this.fingerprint, new Set(this.registeredIds))
    const missing = members.filter((pid) => !this.registeredByFingerprint.has(fingerprintOf(pid)))
    for (const [, node] of await partitionStore.readRegistered(this.ctx.settings.db, missing)) this.registeredByFingerprint.set(node.fingerprint, new Set(node.registered))
    const sets = new Map(members.map((pid) => [pid, this.registeredByFingerprint.get(fingerprintOf(pid)) ?? new Set<string>()]))
    // The partial ids depend only on which registrations are live: re-read when that set changes.
    const key = [...new Set(members.map(fingerprintOf))].sort().join(',')
    if (this.partialRunning?.key !== key) {
      // Ids some member registers and another does not: only their partitions need a capable node.
      const all = [...sets.values()]
      const union = new Set(all.flatMap((s) => [...s]))
      const partial = [...union].filter((id) => !all.every((s) => s.has(id)))
      const byPartition = new Map<number, string[]>()
      for (const { reaktorId, partition } of await partitionStore.readRunningIds(this.ctx.settings.db, partial)) {
        byPartition.set(partition, [...(byPartition.get(partition) ?? []), reaktorId])
      }
      this.partialRunning = { key, byPartition }
    }
    const byPartition = this.partialRunning.byPartition
    return (p, pid) => (byPartition.get(p) ?? []).every((id) => sets.get(pid)?.has(id) === true)
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
