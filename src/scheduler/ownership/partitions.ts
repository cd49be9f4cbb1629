/**
 * Partitioned ownership: the pure part (no I/O), unit-tested on its own.
 *
 * A cluster has a fixed number of partitions, stored in its database at the first start. A
 * reaktor belongs to partition `partitionOf(id, count)`; a node owns a partition by holding ONE
 * session advisory lock for it and runs the running reaktors of the partitions it owns. So the
 * number of advisory locks is bounded by the partition count (plus one membership lock per node),
 * whatever the number of reaktors: PostgreSQL's shared lock table (about 10,000 to 15,000 entries
 * with default settings, for every session together) is never the limit.
 */

/** The partition count a cluster gets when its database is first used and PARTITIONS is unset. */
export const DEFAULT_PARTITIONS = 256
/** Stored beside the count: a future change of the hash must not silently move every reaktor. */
export const PARTITION_HASH = 'fnv1a32-utf8'

const encoder = new TextEncoder()

/**
 * FNV-1a (32 bits) over the id's UTF-8 bytes, modulo the partition count. Written out here (not
 * PostgreSQL's internal `hashtext`, not a library) so that the mapping is fixed by this code alone:
 * every node of every version computes the same partition for the same id.
 */
export function partitionOf (reaktorId: string, partitions: number): number {
  let hash = 0x811c9dc5
  for (const byte of encoder.encode(reaktorId)) {
    hash ^= byte
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash % partitions
}

/** What a reconcile pass knows about the cluster (from pg_locks and the census of running rows). */
export interface ClusterView {
  /** This node's lock-connection pid. */
  me: number
  /** Live nodes: pids holding the membership lock (this node included). */
  members: readonly number[]
  /** Partition → pid of the session holding its lock (absent: free). */
  holders: ReadonlyMap<number, number>
  /** Partition → running reaktors in it (absent: none). */
  weights: ReadonlyMap<number, number>
  partitions: number
  /**
   * Whether a member can run every running reaktor of a partition (nodes that register different
   * apps). Absent: every member can run everything (the usual, homogeneous cluster).
   */
  eligible?: (partition: number, pid: number) => boolean
}

export interface PlanOptions {
  /** Free partitions that have been free this long are taken by anyone (liveness before balance). */
  orphans: ReadonlySet<number>
  /** Partitions of this node that must not be handed over now (just taken as orphans). */
  keep: ReadonlySet<number>
  /** Partitions of this node being handed over or released: neither taken nor given again. */
  leaving: ReadonlySet<number>
  /** Shuffles the candidates (nodes competing at one moment then mostly try different locks). */
  shuffle?: <T>(items: T[]) => T[]
}

export interface Plan {
  /** Free partitions to try to lock, in order. */
  take: number[]
  /** Own partitions to hand over (between runs). */
  give: number[]
  /** The balance this plan aims at, for logs, metrics and tests. */
  share: OwnershipShare
}

/** The even-spreading arithmetic of one pass. */
export interface OwnershipShare {
  /** Live nodes. */
  members: number
  /** Running reaktors in the whole cluster (partitions with a known weight). */
  running: number
  /** ceil(running / members): the running reaktors a node aims to hold at most. */
  share: number
  /** ceil(partitions / members): the partitions a node aims to hold at most (empty ones move by this). */
  partitionShare: number
  /** Running reaktors in this node's partitions. */
  load: number
  /** Partitions this node holds. */
  held: number
}

/**
 * Even spreading, decided by each node for itself from the same view (no coordinator):
 * - balance the running reaktors: with n running and k members, a node takes a free partition
 *   while its load plus the partition's weight stays within ceil(n/k), and the least-loaded member
 *   able to run it takes any free one (so a partition heavier than every node's room still finds a
 *   home at once);
 * - balance empty partitions by count, so that reaktors started later spread too;
 * - hand a partition over only when that moves load from above the share to a member that then
 *   stays within it (every handover strictly evens the spread: no ping-pong);
 * - free partitions nobody took within the orphan grace are taken by anyone.
 */
export function planOwnership (view: ClusterView, opts: PlanOptions): Plan {
  const members = view.members.length > 0 ? [...view.members].sort((a, b) => a - b) : [view.me]
  const k = members.length
  const weight = (p: number): number => view.weights.get(p) ?? 0
  const eligible = view.eligible ?? (() => true)
  const load = new Map<number, number>(members.map((m) => [m, 0]))
  const count = new Map<number, number>(members.map((m) => [m, 0]))
  let running = 0
  for (const w of view.weights.values()) running += w
  const mine: number[] = []
  const free: number[] = []
  for (let p = 0; p < view.partitions; p++) {
    const holder = view.holders.get(p)
    if (holder === undefined) {
      if (!opts.leaving.has(p)) free.push(p)
      continue
    }
    // Being handed over: already counted as gone (else every pass would give away another batch
    // while a long run delays the handover).
    if (holder === view.me && opts.leaving.has(p)) continue
    if (holder === view.me) mine.push(p)
    if (load.has(holder)) {
      load.set(holder, load.get(holder)! + weight(p))
      count.set(holder, count.get(holder)! + 1)
    }
  }
  const share = Math.ceil(running / k)
  const partitionShare = Math.ceil(view.partitions / k)
  const ranked = (m: Map<number, number>): number[] => [...members].sort((a, b) => m.get(a)! - m.get(b)! || a - b)
  let myLoad = load.get(view.me) ?? 0
  let myCount = count.get(view.me) ?? 0
  const summary = (): OwnershipShare => ({ members: k, running, share, partitionShare, load: myLoad, held: myCount })

  // Nodes able to run all of a partition; when none is, anyone may hold it (it runs what it can).
  const canRun = (p: number, pid: number): boolean => eligible(p, pid) || !members.some((m) => eligible(p, m))

  const take: number[] = []
  const shuffled = (opts.shuffle ?? ((x) => x))([...free])
  // Heavier partitions first: the room fills with the fewest locks.
  shuffled.sort((a, b) => weight(b) - weight(a))
  for (const p of shuffled) {
    const w = weight(p)
    // Of the members able to run it: one that cannot (it does not register all of it) never takes
    // it, and the partition would wait for the orphan grace.
    const least = (w > 0 ? ranked(load) : ranked(count)).find((m) => canRun(p, m))!
    const wanted = canRun(p, view.me) && (opts.orphans.has(p) ||
      (w > 0 ? myLoad + w <= share || least === view.me : myCount < partitionShare || least === view.me))
    if (wanted) take.push(p)
    // Count what this pass takes, so one node does not take everything at once; and what the least
    // loaded member takes when this node does not (it plans alike), or the partitions beyond every
    // share (a node's, handed over as it could not run them) would be taken one per node and pass.
    const taker = wanted ? view.me : least
    load.set(taker, load.get(taker)! + w)
    count.set(taker, count.get(taker)! + 1)
    myLoad = load.get(view.me)!
    myCount = count.get(view.me)!
  }

  const give: number[] = []
  const given = new Set<number>()
  const others = members.filter((m) => m !== view.me)
  const hand = (p: number, receiver: number): void => {
    give.push(p)
    given.add(p)
    myLoad -= weight(p)
    myCount -= 1
    load.set(receiver, load.get(receiver)! + weight(p))
    count.set(receiver, count.get(receiver)! + 1)
  }
  const movable = mine.filter((p) => !opts.keep.has(p) && !opts.leaving.has(p))
  if (others.length > 0 && take.length === 0) {
    // A partition this node cannot fully run goes to a member that can.
    for (const p of movable) {
      const able = others.filter((m) => eligible(p, m))
      if (!eligible(p, view.me) && able.length > 0) hand(p, able.sort((a, b) => load.get(a)! - load.get(b)! || a - b)[0])
    }
    // Load, heaviest first: from this node while it is above the share, to a member that stays
    // within it. Both ends then lie within the old extremes, so the spread strictly evens out.
    for (const p of movable.filter((x) => weight(x) > 0 && !given.has(x)).sort((a, b) => weight(b) - weight(a))) {
      if (myLoad <= share) break
      const receiver = others.filter((m) => canRun(p, m)).sort((a, b) => load.get(a)! - load.get(b)! || a - b)[0]
      if (receiver !== undefined && load.get(receiver)! + weight(p) <= share) hand(p, receiver)
    }
    // Empty partitions, by count.
    for (const p of movable.filter((x) => weight(x) === 0 && !given.has(x))) {
      if (myCount <= partitionShare) break
      const receiver = ranked(count).find((m) => m !== view.me)!
      if (count.get(receiver)! >= partitionShare) break
      hand(p, receiver)
    }
  }
  return { take, give, share: summary() }
}
