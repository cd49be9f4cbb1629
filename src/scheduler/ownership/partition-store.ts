import { sql, type Kysely } from 'kysely'
import type { Database } from '../../db/schema.js'
import { CLUSTER_LOCK_NAMESPACE, LEAVING_KEY, MEMBERSHIP_KEY, PARTITION_LOCK_NAMESPACE, PARTITIONED_PROTOCOL_KEY } from './keys.js'
import { DEFAULT_PARTITIONS, PARTITION_HASH } from './partitions.js'

/**
 * The SQL of partitioned ownership: the cluster's partition count, who holds which partition
 * (pg_locks), what each node registers, and claiming and giving back partitions. Functions take
 * `db` first (a Kysely instance on the pool, or a transaction).
 */

/** LISTEN/NOTIFY channel of released partitions; the payload is how many were released. */
export const PARTITION_CHANNEL = 'reaktor_partitions'

/*
 * pg_locks is cluster-wide: every lock query is limited to this database. A two-int4 advisory lock
 * `(namespace, key)` shows as classid = namespace, objid = key as an unsigned 32-bit oid, objsubid 2.
 */
const THIS_DATABASE = sql`(select oid from pg_database where datname = current_database())`
export const partitionLocks = sql`
  select l.objid::bigint::int as partition, l.pid from pg_locks as l
  where l.locktype = 'advisory' and l.database = ${THIS_DATABASE} and l.granted
    and l.classid = ${PARTITION_LOCK_NAMESPACE}::bigint::oid and l.objsubid = 2
`

export class PartitionCountMismatch extends Error {
  readonly code = 'REAKTOR_PARTITIONS_MISMATCH'
  constructor (readonly configured: number, readonly stored: number) {
    super(`PARTITIONS=${configured} does not match this cluster: its database was first started with ${stored} partitions, ` +
      `and the count cannot change afterwards (every node must map each reaktor to the same partition). Unset PARTITIONS or set it to ${stored}.`)
    this.name = 'PartitionCountMismatch'
  }
}

/**
 * The partition count of this cluster. The first node to start on a database stores its own
 * (`configured`, else the default) with the partition rows; every later node reads it, and one
 * configured differently refuses to start. (The table's check keeps a stored count in range.)
 */
export async function ensurePartitions (db: Kysely<Database>, configured: number | undefined): Promise<number> {
  const wanted = configured ?? DEFAULT_PARTITIONS
  await sql`
    insert into reaktor_cluster (id, partitions, partition_hash) values (1, ${wanted}, ${PARTITION_HASH})
    on conflict (id) do nothing
  `.execute(db)
  const stored = await db.selectFrom('reaktor_cluster').select(['partitions', 'partition_hash']).executeTakeFirstOrThrow()
  if (stored.partition_hash !== PARTITION_HASH) {
    throw new Error(`this cluster maps reaktors to partitions with "${stored.partition_hash}", this version with "${PARTITION_HASH}"; start a version that matches the cluster`)
  }
  if (configured !== undefined && configured !== stored.partitions) throw new PartitionCountMismatch(configured, stored.partitions)
  await sql`
    insert into reaktor_partitions (partition) select g from generate_series(0, ${stored.partitions - 1}::int) as g
    on conflict (partition) do nothing
  `.execute(db)
  return stored.partitions
}

/** Who holds what, from pg_locks: one cheap statement per full reconcile pass. */
export interface LockView {
  /** Live nodes of this version: sessions holding the membership and the protocol lock. */
  members: number[]
  /** Membership holders WITHOUT the protocol lock: nodes of the previous version. */
  legacy: number[]
  /** Partition → pid of the session holding it. */
  holders: Map<number, number>
  /** Member pid → the registration fingerprint it published (absent: not published yet). */
  fingerprints: Map<number, string>
}

export async function readLockView (db: Kysely<Database>): Promise<LockView> {
  const { rows } = await sql<{ ns: number, key: number, pid: number, fingerprint: string | null }>`
    select l.classid::bigint::int as ns, l.objid::bigint::int as key, l.pid, n.fingerprint
    from pg_locks as l
    left join reaktor_nodes as n on n.lock_pid = l.pid and l.classid = ${CLUSTER_LOCK_NAMESPACE}::bigint::oid
    where l.locktype = 'advisory' and l.database = ${THIS_DATABASE} and l.granted and l.objsubid = 2
      and l.classid in (${CLUSTER_LOCK_NAMESPACE}::bigint::oid, ${PARTITION_LOCK_NAMESPACE}::bigint::oid)
  `.execute(db)
  const membership = new Set<number>()
  const protocol = new Set<number>()
  const leaving = new Set<number>()
  const holders = new Map<number, number>()
  const fingerprints = new Map<number, string>()
  for (const r of rows) {
    if (r.ns === PARTITION_LOCK_NAMESPACE) {
      holders.set(r.key, r.pid)
      continue
    }
    if (r.key === MEMBERSHIP_KEY) membership.add(r.pid)
    if (r.key === PARTITIONED_PROTOCOL_KEY) protocol.add(r.pid)
    if (r.key === LEAVING_KEY) leaving.add(r.pid)
    if (r.fingerprint !== null) fingerprints.set(r.pid, r.fingerprint)
  }
  return {
    members: [...membership].filter((pid) => protocol.has(pid) && !leaving.has(pid)),
    legacy: [...membership].filter((pid) => !protocol.has(pid)),
    holders,
    fingerprints
  }
}

/**
 * Sessions holding the membership lock without the protocol mark, seen so in two reads `apartMs`
 * apart: nodes of the previous version. One read is not enough: PostgreSQL releases a session's
 * locks one at a time when it ends or calls pg_advisory_unlock_all (a node shutting down or
 * exiting), so for an instant its membership can show without its mark.
 */
export async function readLegacyNodes (db: Kysely<Database>, apartMs: number): Promise<number[]> {
  const first = (await readLockView(db)).legacy
  if (first.length === 0) return []
  await new Promise((resolve) => setTimeout(resolve, apartMs))
  const again = new Set((await readLockView(db)).legacy)
  return first.filter((pid) => again.has(pid))
}

/** Running reaktors per partition (the weights of even spreading). */
export async function readCensus (db: Kysely<Database>): Promise<Map<number, number>> {
  const { rows } = await sql<{ partition: number, running: number }>`
    select partition, count(*)::int as running from polling_reaktors
    where state = 'running' and partition is not null group by partition
  `.execute(db)
  return new Map(rows.map((r) => [r.partition, r.running]))
}

/** Publishes what this node registers, under its lock session (before it joins the cluster). */
export async function publishNode (
  db: Kysely<Database>, node: { pid: number, nodeId: string, fingerprint: string, registered: readonly string[] }
): Promise<void> {
  await db.transaction().execute(async (trx) => {
    // Rows of sessions that are gone (dead nodes; a reused pid is overwritten below). A node that
    // has published but not joined yet is a live session: its row stays.
    await sql`
      delete from reaktor_nodes where lock_pid <> ${node.pid} and lock_pid not in (select pid from pg_stat_activity)
    `.execute(trx)
    await sql`
      insert into reaktor_nodes (lock_pid, node_id, fingerprint, registered) values (${node.pid}, ${node.nodeId}, ${node.fingerprint}, ${[...node.registered]}::text[])
      on conflict (lock_pid) do update set node_id = excluded.node_id, fingerprint = excluded.fingerprint,
        registered = excluded.registered, joined_at = now()
    `.execute(trx)
  })
}

/** The ids a node published (only read when the nodes of a cluster register different reaktors). */
export async function readRegistered (db: Kysely<Database>, pids: readonly number[]): Promise<Map<number, { fingerprint: string, registered: string[] }>> {
  if (pids.length === 0) return new Map()
  const rows = await db.selectFrom('reaktor_nodes').select(['lock_pid', 'fingerprint', 'registered'])
    .where('lock_pid', 'in', [...pids]).execute()
  return new Map(rows.map((r) => [r.lock_pid, { fingerprint: r.fingerprint, registered: r.registered }]))
}

/** Which of these ids are running, with their partition. */
export async function readRunningIds (db: Kysely<Database>, ids: readonly string[]): Promise<Array<{ reaktorId: string, partition: number }>> {
  if (ids.length === 0) return []
  const { rows } = await sql<{ reaktor_id: string, partition: number }>`
    select reaktor_id, partition from polling_reaktors
    where reaktor_id = any(${[...ids]}::text[]) and state = 'running' and partition is not null
  `.execute(db)
  return rows.map((r) => ({ reaktorId: r.reaktor_id, partition: r.partition }))
}

/** A partition just claimed: its new generation, and the node the row named before (null: released). */
export interface Claimed {
  generation: string
  previousOwner: string | null
}

/**
 * Marks partitions whose lock this node has just taken as its own: a new generation each, so that
 * the late writes of a previous holder (fenced, not yet aware) no longer move their schedule.
 * Their reaktors are no longer `blocked`: a stuck run of the previous holder does not hold back
 * the new one (that run is aborted, or gone with its process), unless the new holder is the same
 * node taking its partitions back, whose own stuck runs (`stillBlocked`) still do. Likewise their
 * `running_since`: the runs it names are gone or aborted (a dead node's stays behind, and would show
 * on the live new owner until its own first run), except this node's own runs still settling
 * (`stillRunning`, which clear theirs when they do).
 * `previousOwner` is who held it before: a release (handover, shutdown) clears the owner first,
 * so a name left there means the previous holder's session ended without a release.
 */
export async function claimPartitions (
  db: Kysely<Database>, nodeId: string, partitions: readonly number[], stillBlocked: readonly string[] = [], stillRunning: readonly string[] = stillBlocked
): Promise<Map<number, Claimed>> {
  if (partitions.length === 0) return new Map()
  // One update for both columns: two data-modifying CTEs on one row leave it undefined which wins.
  const { rows } = await sql<{ partition: number, generation: string, previous_owner: string | null }>`
    with unblocked as (
      update polling_reaktors
      set blocked = blocked and reaktor_id = any(${[...stillBlocked]}::text[]),
          running_since = case when reaktor_id = any(${[...stillRunning]}::text[]) then running_since end
      where partition = any(${[...partitions]}::int[])
        and ((blocked and reaktor_id <> all(${[...stillBlocked]}::text[]))
          or (running_since is not null and reaktor_id <> all(${[...stillRunning]}::text[])))
    )
    update reaktor_partitions as rp set owner = ${nodeId}, generation = rp.generation + 1
    from reaktor_partitions as before
    where rp.partition = any(${[...partitions]}::int[]) and before.partition = rp.partition
    returning rp.partition, rp.generation, before.owner as previous_owner
  `.execute(db)
  return new Map(rows.map((r) => [r.partition, { generation: String(r.generation), previousOwner: r.previous_owner }]))
}

/** Clears the owner of partitions this node gives back (only while it is still the one named). */
export async function releasePartitions (db: Kysely<Database>, nodeId: string, partitions: readonly number[]): Promise<void> {
  if (partitions.length === 0) return
  await sql`
    update reaktor_partitions set owner = null
    where partition = any(${[...partitions]}::int[]) and owner = ${nodeId}
  `.execute(db)
}

/** Tells every node that these partitions are free (an under-share node takes them at once). */
export async function announcePartitions (db: Kysely<Database>, partitions: readonly number[]): Promise<void> {
  if (partitions.length === 0) return
  // The receivers look at pg_locks anyway; the count keeps the payload far below its 8000 bytes.
  await sql`select pg_notify(${PARTITION_CHANNEL}, ${String(partitions.length)})`.execute(db)
}
