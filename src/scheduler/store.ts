import { sql, type Kysely } from 'kysely'
import type { Database, PollingReaktorRow } from '../db/schema.js'
import { CLUSTER_LOCK_NAMESPACE, REAKTOR_LOCK_NAMESPACE } from './keys.js'

/**
 * The SQL of the scheduler: the persisted state record of every polling reaktor (spec 2.2).
 * Functions take `db` first (a Kysely instance on the pool, or a transaction).
 */

/** LISTEN/NOTIFY channel of state changes; the payload is the reaktor id. */
export const NOTIFY_CHANNEL = 'reaktor_polling'

export type PollingState = 'running' | 'stopped'

/** What the reconcile loop needs to decide ownership. */
export interface ScheduleRow {
  reaktorId: string
  state: PollingState
  /** bigint as a string (pg returns int8 as text; compared, never added). */
  version: string
  nextRun: Date | null
  consecutiveFailures: number
}

/** The latest result of one reaktor's runs, waiting for the next batched flush. */
export interface RunRecord {
  reaktorId: string
  runId: string
  lastRun: Date
  nextRun: Date
  lastError: string | null
  consecutiveFailures: number
  /** `state_version` the runner was started under: the result applies only while it still matches. */
  version: string
  owner: string
}

export interface BootRegistration {
  reaktorId: string
  interval: string
  autoStart: boolean
}

/*
 * pg_locks is cluster-wide: every lock query is limited to this database. A two-int4 advisory lock
 * `(namespace, key)` shows as classid = namespace, objid = key as an unsigned 32-bit oid, objsubid 2.
 */
const THIS_DATABASE = sql`(select oid from pg_database where datname = current_database())`
const reaktorKey = (column: string): ReturnType<typeof sql> => sql`(hashtext(${sql.ref(column)})::bigint & 4294967295)::oid`
const reaktorLocks = sql`
  select l.objid, l.pid from pg_locks as l
  where l.locktype = 'advisory' and l.database = ${THIS_DATABASE} and l.granted
    and l.classid = ${REAKTOR_LOCK_NAMESPACE}::bigint::oid and l.objsubid = 2
`

/**
 * The state records, for status and list. `owner` is shown only while some session holds the
 * reaktor's advisory lock: the column of a node that died (kill -9) is stale from the moment
 * PostgreSQL ended its session, long before a reconcile pass clears or a new owner overwrites it.
 */
export async function readRows (db: Kysely<Database>, ids: readonly string[]): Promise<PollingReaktorRow[]> {
  if (ids.length === 0) return []
  const { rows } = await sql<PollingReaktorRow>`
    select p.reaktor_id, p.state, p.interval, p.last_run, p.next_run, p.updated_at, p.last_error,
           p.consecutive_failures, p.state_version, p.last_run_id,
           case when exists (select 1 from (${reaktorLocks}) as held where held.objid = ${reaktorKey('p.reaktor_id')})
                then p.owner end as owner
    from polling_reaktors as p
    where p.reaktor_id = any(${[...ids]}::text[])
  `.execute(db)
  return rows
}

/** One row of the reconcile view: the schedule plus what the lock table says about it. */
export interface ReconcileRow extends ScheduleRow {
  owner: string | null
  /** Some OTHER session (another node) holds this reaktor's key right now. */
  heldElsewhere: boolean
}

export interface ReconcileView {
  /** Of the ids asked for: those this node owns (any state), and running ones nobody else holds. */
  rows: ReconcileRow[]
  /** Running reaktors among the registered ids: the n of the fair share. */
  running: number
  /** Sessions holding the cluster-membership lock, i.e. live nodes: the k of the fair share. */
  members: number
  /** Fewest reaktor locks any OTHER live node holds (null: no other node): is anyone under share? */
  leastLoaded: number | null
}

/**
 * Everything one reconcile pass needs, in ONE statement. Running reaktors held by another node
 * are counted but not returned: at steady state a pass reads about n/k rows, not all n.
 */
export async function readReconcileView (
  db: Kysely<Database>,
  opts: { ids: readonly string[], owned: readonly string[], registered: readonly string[], lockPid: number }
): Promise<ReconcileView> {
  const { rows } = await sql<{
    members: number, least_loaded: number | null, running: number, reaktor_id: string | null, state: PollingState, state_version: string,
    next_run: Date | null, consecutive_failures: number, owner: string | null, held_elsewhere: boolean
  }>`
    with held as (
      ${reaktorLocks}
    ), others as (
      select objid from held where pid <> ${opts.lockPid}
    ), nodes as (
      select distinct l.pid from pg_locks as l
      where l.locktype = 'advisory' and l.database = ${THIS_DATABASE} and l.granted
        and l.classid = ${CLUSTER_LOCK_NAMESPACE}::bigint::oid and l.objid = 0 and l.objsubid = 2
    ), counts as (
      select
        (select count(*) from nodes)::int as members,
        (select min(x.locks) from (
           select n.pid, count(h.pid) as locks from nodes as n left join held as h on h.pid = n.pid
           where n.pid <> ${opts.lockPid} group by n.pid
         ) as x)::int as least_loaded,
        (select count(*) from polling_reaktors
         where state = 'running' and reaktor_id = any(${[...opts.registered]}::text[]))::int as running
    )
    select c.members, c.least_loaded, c.running, v.reaktor_id, v.state, v.state_version, v.next_run, v.consecutive_failures,
           v.owner, v.held_elsewhere
    from counts as c
    left join (
      select p.*, exists (select 1 from others as o where o.objid = ${reaktorKey('p.reaktor_id')}) as held_elsewhere
      from polling_reaktors as p
      where p.reaktor_id = any(${[...opts.ids]}::text[])
    ) as v on v.reaktor_id = any(${[...opts.owned]}::text[]) or (v.state = 'running' and not v.held_elsewhere)
  `.execute(db)
  return {
    members: rows[0]?.members ?? 0,
    leastLoaded: rows[0]?.least_loaded ?? null,
    running: rows[0]?.running ?? 0,
    rows: rows.filter((r) => r.reaktor_id !== null).map((r) => ({
      reaktorId: r.reaktor_id!,
      state: r.state,
      version: String(r.state_version),
      nextRun: r.next_run,
      consecutiveFailures: r.consecutive_failures,
      owner: r.owner,
      heldElsewhere: r.held_elsewhere
    }))
  }
}

/**
 * Clears the `owner` of reaktors whose lock nobody holds (their node died or was fenced and no
 * node has taken them over yet). The lock table is checked in the statement itself: a node that
 * has just taken the lock keeps its claim, and one taking it later overwrites the null.
 */
export async function clearStaleOwners (db: Kysely<Database>, ids: readonly string[]): Promise<number> {
  if (ids.length === 0) return 0
  const res = await sql`
    update polling_reaktors as p set owner = null
    where p.reaktor_id = any(${[...ids]}::text[]) and p.owner is not null
      and not exists (select 1 from (${reaktorLocks}) as held where held.objid = ${reaktorKey('p.reaktor_id')})
  `.execute(db)
  return Number(res.numAffectedRows ?? 0)
}

/** Tells every node to reconcile these ids now (a released lock is taken over at once). */
export async function announce (db: Kysely<Database>, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return
  await sql`select pg_notify(${NOTIFY_CHANNEL}, id) from unnest(${[...ids]}::text[]) as id`.execute(db)
}

/**
 * The advisory-lock key of each id: PostgreSQL's own `hashtext`, so every node (whatever its
 * language or version) derives the same key from the same id.
 */
export async function lockKeys (db: Kysely<Database>, ids: readonly string[]): Promise<Map<string, number>> {
  if (ids.length === 0) return new Map()
  const { rows } = await sql<{ id: string, key: number }>`
    select id, hashtext(id) as key from unnest(${[...ids]}::text[]) as id
  `.execute(db)
  return new Map(rows.map((r) => [r.id, Number(r.key)]))
}

/**
 * Boot-time rows and restart rules (DESIGN.md section 4). Always: a registered reaktor without a
 * row gets one, `running` when autoStart (first run due at once) else `stopped` — inserting a row
 * changes no existing state, so a node joining a live cluster does it too. Only at a cluster cold
 * start: a `running` row whose autoStart is false becomes `stopped` (a manual start is required),
 * and stale owners (all nodes were dead) are cleared. A stored `stopped` is never touched (the
 * operator's stop is respected) and a stored `next_run` is never overwritten.
 */
export async function applyBootRules (
  db: Kysely<Database>, regs: readonly BootRegistration[], at: Date, coldStart: boolean
): Promise<{ inserted: number, stopped: number }> {
  if (regs.length === 0) return { inserted: 0, stopped: 0 }
  const ids = regs.map((r) => r.reaktorId)
  const intervals = regs.map((r) => r.interval)
  const autos = regs.map((r) => r.autoStart)
  return await db.transaction().execute(async (trx) => {
    const inserted = await sql`
      insert into polling_reaktors (reaktor_id, state, interval, next_run, updated_at)
      select v.id, case when v.auto then 'running' else 'stopped' end, v.interval,
             case when v.auto then ${at}::timestamptz end, ${at}::timestamptz
      from unnest(${ids}::text[], ${intervals}::text[], ${autos}::boolean[]) as v(id, interval, auto)
      on conflict (reaktor_id) do nothing
    `.execute(trx)
    // The interval is definition, not state: keep the row in step with the code.
    await sql`
      update polling_reaktors as p set interval = v.interval
      from unnest(${ids}::text[], ${intervals}::text[]) as v(id, interval)
      where p.reaktor_id = v.id and p.interval <> v.interval
    `.execute(trx)
    let stopped = 0
    if (coldStart) {
      const res = await sql`
        update polling_reaktors as p
        set state = 'stopped', next_run = null, owner = null, updated_at = ${at}::timestamptz,
            state_version = p.state_version + 1
        from unnest(${ids}::text[], ${autos}::boolean[]) as v(id, auto)
        where p.reaktor_id = v.id and p.state = 'running' and not v.auto
      `.execute(trx)
      stopped = Number(res.numAffectedRows ?? 0)
      await sql`
        update polling_reaktors set owner = null
        where reaktor_id = any(${ids}::text[]) and owner is not null
      `.execute(trx)
    }
    return { inserted: Number(inserted.numAffectedRows ?? 0), stopped }
  })
}

/** What a start or stop wrote: whether the state changed, and the row's `state_version` after it. */
export interface StateWrite {
  changed: boolean
  /** The version the row has now (bigint as a string); null only when the row could not be read. */
  version: string | null
}

/**
 * Writes a start (awaited before the caller is answered) and announces it. Only a `stopped` (or
 * missing) row changes: the first run is due at once. `changed` is false when it was already running.
 */
export async function writeStart (db: Kysely<Database>, id: string, interval: string, at: Date): Promise<StateWrite> {
  // The NOTIFY is sent on commit of this very statement: no listener can see it before the row.
  const { rows } = await sql<{ state_version: string }>`
    with changed as (
      insert into polling_reaktors as p (reaktor_id, state, interval, next_run, updated_at, state_version)
      values (${id}, 'running', ${interval}, ${at}::timestamptz, ${at}::timestamptz, 1)
      on conflict (reaktor_id) do update
        set state = 'running', interval = excluded.interval, next_run = excluded.next_run,
            updated_at = excluded.updated_at, owner = null, state_version = p.state_version + 1
        where p.state = 'stopped'
      returning p.reaktor_id, p.state_version
    )
    select pg_notify(${NOTIFY_CHANNEL}, reaktor_id), state_version from changed
  `.execute(db)
  return { changed: rows.length > 0, version: rows.length > 0 ? String(rows[0].state_version) : null }
}

/**
 * Writes a stop (awaited before the caller is answered) and announces it. `changed` is false when
 * it was already stopped; `version` is the row's version either way (the caller refuses to start a
 * runner from any older read of the row: that read predates this stop).
 */
export async function writeStop (db: Kysely<Database>, id: string, interval: string, at: Date): Promise<StateWrite> {
  const { rows } = await sql<{ state_version: string }>`
    with changed as (
      update polling_reaktors as p
      set state = 'stopped', next_run = null, owner = null, updated_at = ${at}::timestamptz,
          state_version = p.state_version + 1
      where p.reaktor_id = ${id} and p.state = 'running'
      returning p.reaktor_id, p.state_version
    )
    select pg_notify(${NOTIFY_CHANNEL}, reaktor_id), state_version from changed
  `.execute(db)
  if (rows.length > 0) return { changed: true, version: String(rows[0].state_version) }
  // Already stopped (or never seen): make sure the row exists, and report its version.
  const { rows: current } = await sql<{ state_version: string }>`
    with inserted as (
      insert into polling_reaktors (reaktor_id, state, interval, updated_at)
      values (${id}, 'stopped', ${interval}, ${at}::timestamptz)
      on conflict (reaktor_id) do nothing
      returning state_version
    )
    select state_version from inserted
    union all
    select state_version from polling_reaktors where reaktor_id = ${id}
  `.execute(db)
  return { changed: false, version: current.length > 0 ? String(current[0].state_version) : null }
}

/**
 * Claims reaktors whose advisory lock this node has just taken, each under the `state_version` it
 * saw running. Returns the rows actually claimed, as they are now: a reaktor stopped (or stopped
 * and started again) since that read is not claimed, so no runner starts from a stale read. Run
 * under the lock, so `next_run` is final: the previous owner flushed its last result before it
 * released the lock (or died, and its unflushed batch is lost anyway).
 */
export async function claimOwner (
  db: Kysely<Database>, nodeId: string, claims: ReadonlyArray<{ reaktorId: string, version: string }>
): Promise<ScheduleRow[]> {
  if (claims.length === 0) return []
  const { rows } = await sql<{ reaktor_id: string, state_version: string, next_run: Date | null, consecutive_failures: number }>`
    update polling_reaktors as p set owner = ${nodeId}
    from unnest(${claims.map((c) => c.reaktorId)}::text[], ${claims.map((c) => c.version)}::bigint[]) as v(id, version)
    where p.reaktor_id = v.id and p.state = 'running' and p.state_version = v.version
    returning p.reaktor_id, p.state_version, p.next_run, p.consecutive_failures
  `.execute(db)
  return rows.map((r) => ({
    reaktorId: r.reaktor_id,
    state: 'running',
    version: String(r.state_version),
    nextRun: r.next_run,
    consecutiveFailures: r.consecutive_failures
  }))
}

/**
 * Whether another node owned a running reaktor when it was last seen: no node holds the
 * membership lock, yet some did not shut down cleanly (a shutdown clears its owners). Either the
 * whole cluster crashed, or the nodes are only disconnected (a database restart) and about to
 * reconnect: a booting node then waits a little before it calls it a cold start.
 */
export async function othersOwnedRunning (db: Kysely<Database>, nodeId: string): Promise<boolean> {
  const { rows } = await sql<{ found: boolean }>`
    select exists (
      select 1 from polling_reaktors where state = 'running' and owner is not null and owner <> ${nodeId}
    ) as found
  `.execute(db)
  return rows[0]?.found === true
}

/** At shutdown: nobody runs these until another node takes them over. */
export async function releaseOwner (db: Kysely<Database>, nodeId: string, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return
  await sql`
    update polling_reaktors set owner = null
    where reaktor_id = any(${[...ids]}::text[]) and owner = ${nodeId}
  `.execute(db)
}

/**
 * One statement for a whole batch of run results. The result columns (`last_run`, `last_error`,
 * ...) only move forward in time; the schedule columns (`next_run`, `owner`) are written only while
 * the row is still `running` under the version the run belonged to and no other node has claimed
 * it since, so a flush landing after a stop (or a stop + start, or a takeover by another node after
 * this one was fenced) never brings back a next run or an owner.
 */
export async function writeRunResults (db: Kysely<Database>, batch: readonly RunRecord[]): Promise<number> {
  if (batch.length === 0) return 0
  const res = await sql`
    update polling_reaktors as p set
      last_run = v.last_run,
      last_run_id = v.run_id,
      last_error = v.last_error,
      consecutive_failures = v.failures,
      next_run = case when p.state = 'running' and p.state_version = v.version and coalesce(p.owner, v.owner) = v.owner
                      then v.next_run else p.next_run end,
      owner = case when p.state = 'running' and p.state_version = v.version and coalesce(p.owner, v.owner) = v.owner
                   then v.owner else p.owner end
    from unnest(
      ${batch.map((r) => r.reaktorId)}::text[],
      ${batch.map((r) => r.lastRun.toISOString())}::timestamptz[],
      ${batch.map((r) => r.runId)}::text[],
      ${batch.map((r) => r.lastError)}::text[],
      ${batch.map((r) => r.consecutiveFailures)}::int[],
      ${batch.map((r) => r.nextRun.toISOString())}::timestamptz[],
      ${batch.map((r) => r.version)}::bigint[],
      ${batch.map((r) => r.owner)}::text[]
    ) as v(id, last_run, run_id, last_error, failures, next_run, version, owner)
    where p.reaktor_id = v.id and (p.last_run is null or p.last_run <= v.last_run)
  `.execute(db)
  return Number(res.numAffectedRows ?? 0)
}
