import { sql, type Kysely, type RawBuilder } from 'kysely'
import type { Database, PollingReaktorRow, RunOutcomeName } from '../db/schema.js'
import { partitionLocks } from './ownership/partition-store.js'

/**
 * The SQL of the scheduler about reaktors: the persisted state record of every polling reaktor
 * (partition-store.ts has the SQL about partitions and nodes).
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
  partition: number | null
}

/** The latest result of one reaktor's runs, waiting for the next batched flush. */
export interface RunRecord {
  reaktorId: string
  runId: string
  /** Epoch ms (numbers, not Dates: thousands of these are made every second). */
  lastRun: number
  /** Null while the run is blocked: it is not scheduled before it settles. */
  nextRun: number | null
  lastError: string | null
  consecutiveFailures: number
  /** The run passed its timeout and has not settled yet (its aktor ignores its signal); unset: false. */
  blocked?: boolean
  /** How the run went, and how long it took (null while a timed-out run has not settled). */
  outcome: RunOutcomeName
  durationMs: number | null
  /** Start of this runner's last successful / failed run; null: none since the runner started. */
  successAt: number | null
  failureAt: number | null
  /** `state_version` the runner was started under: the result applies only while it still matches. */
  version: string
  partition: number
  /** Generation of the partition when this node took it: a later takeover makes this write stale. */
  generation: string
}

export interface BootRegistration {
  reaktorId: string
  interval: string
  autoStart: boolean
  partition: number
}

/**
 * The state records, for status and list. `owner` is the node holding the reaktor's partition,
 * shown only while the reaktor runs and some session holds that partition's lock: the owner of a
 * node that died (kill -9) is gone from the moment PostgreSQL ended its session. `running_since`
 * follows the same lock (not the state: a stopped reaktor's run may not have settled yet), since a
 * node that died leaves its last one behind.
 */
export async function readStatusRows (db: Kysely<Database>, ids: readonly string[]): Promise<PollingReaktorRow[]> {
  if (ids.length === 0) return []
  const { rows } = await sql<PollingReaktorRow>`
    with held as (${partitionLocks})
    select p.reaktor_id, p.state, p.interval, p.last_run, p.next_run, p.updated_at, p.last_error,
           p.consecutive_failures, p.state_version, p.last_run_id, p.partition, p.blocked,
           p.last_success_at, p.last_failure_at, p.last_duration_ms, p.last_outcome,
           case when p.state = 'running' and h.live then rp.owner end as owner,
           case when h.live then p.running_since end as running_since
    from polling_reaktors as p
    left join reaktor_partitions as rp on rp.partition = p.partition
    cross join lateral (select exists (select 1 from held where held.partition = p.partition) as live) as h
    where p.reaktor_id = any(${[...ids]}::text[])
  `.execute(db)
  return rows
}

const scheduleColumns = sql`p.reaktor_id, p.state, p.state_version, p.next_run, p.consecutive_failures, p.partition`
function toScheduleRow (r: { reaktor_id: string, state: PollingState, state_version: string, next_run: Date | null, consecutive_failures: number, partition: number | null }): ScheduleRow {
  return {
    reaktorId: r.reaktor_id,
    state: r.state,
    version: String(r.state_version),
    nextRun: r.next_run,
    consecutiveFailures: r.consecutive_failures,
    partition: r.partition
  }
}

/** The running reaktors of some partitions (read under their locks: the schedule is final). */
export async function readRunningIn (db: Kysely<Database>, partitions: readonly number[]): Promise<ScheduleRow[]> {
  if (partitions.length === 0) return []
  const { rows } = await sql<any>`
    select ${scheduleColumns} from polling_reaktors as p
    where p.partition = any(${[...partitions]}::int[]) and p.state = 'running'
  `.execute(db)
  return rows.map(toScheduleRow)
}

/** The schedule of some ids, whatever their state. */
export async function readSchedule (db: Kysely<Database>, ids: readonly string[]): Promise<ScheduleRow[]> {
  if (ids.length === 0) return []
  const { rows } = await sql<any>`
    select ${scheduleColumns} from polling_reaktors as p where p.reaktor_id = any(${[...ids]}::text[])
  `.execute(db)
  return rows.map(toScheduleRow)
}

/** Tells every node to reconcile these ids now. */
export async function announce (db: Kysely<Database>, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return
  await sql`select pg_notify(${NOTIFY_CHANNEL}, id) from unnest(${[...ids]}::text[]) as id`.execute(db)
}

/**
 * Boot-time rows and restart rules (docs/operating.md, "Operating polling reaktors" → "Across restarts").
 * Always: a registered reaktor without a row gets one, `running` when autoStart (first run due at
 * once) else `stopped` — inserting a row changes no existing state, so a node joining a live
 * cluster does it too; the interval and the partition of every registered row are brought in step
 * with the code. Only at a cluster cold start: a `running` row whose autoStart is false becomes
 * `stopped` (a manual start is required), and stale owners (all nodes were dead) are cleared. A
 * stored `stopped` is never touched (the operator's stop is respected) and a stored `next_run` is
 * never overwritten. Returns the ids inserted as running, for the caller to announce to their
 * partition's holder, and the ids the cold start stopped (sorted), for its audit line.
 */
export async function applyBootRules (
  db: Kysely<Database>, regs: readonly BootRegistration[], at: Date, coldStart: boolean
): Promise<{ inserted: number, startedIds: string[], stoppedIds: string[] }> {
  if (regs.length === 0) return { inserted: 0, startedIds: [], stoppedIds: [] }
  const ids = regs.map((r) => r.reaktorId)
  const intervals = regs.map((r) => r.interval)
  const autos = regs.map((r) => r.autoStart)
  const partitions = regs.map((r) => r.partition)
  return await db.transaction().execute(async (trx) => {
    const { rows: inserted } = await sql<{ reaktor_id: string, state: PollingState }>`
      insert into polling_reaktors (reaktor_id, state, interval, next_run, updated_at, partition)
      select v.id, case when v.auto then 'running' else 'stopped' end, v.interval,
             case when v.auto then ${at}::timestamptz end, ${at}::timestamptz, v.partition
      from unnest(${ids}::text[], ${intervals}::text[], ${autos}::boolean[], ${partitions}::int[]) as v(id, interval, auto, partition)
      on conflict (reaktor_id) do nothing
      returning reaktor_id, state
    `.execute(trx)
    // The interval is definition, not state: keep the row in step with the code (and its partition).
    await sql`
      update polling_reaktors as p set interval = v.interval, partition = v.partition
      from unnest(${ids}::text[], ${intervals}::text[], ${partitions}::int[]) as v(id, interval, partition)
      where p.reaktor_id = v.id and (p.interval <> v.interval or p.partition is distinct from v.partition)
    `.execute(trx)
    let stoppedIds: string[] = []
    if (coldStart) {
      const { rows: stopped } = await sql<{ reaktor_id: string }>`
        update polling_reaktors as p
        set ${stopColumns(at)}
        from unnest(${ids}::text[], ${autos}::boolean[]) as v(id, auto)
        where p.reaktor_id = v.id and p.state = 'running' and not v.auto
        returning p.reaktor_id
      `.execute(trx)
      stoppedIds = stopped.map((r) => r.reaktor_id).sort()
      await sql`update polling_reaktors set owner = null where owner is not null`.execute(trx)
      await sql`update reaktor_partitions set owner = null where owner is not null`.execute(trx)
    }
    return { inserted: inserted.length, startedIds: inserted.filter((r) => r.state === 'running').map((r) => r.reaktor_id), stoppedIds }
  })
}

/** What a start or stop wrote: whether the state changed, and the row's `state_version` after it. */
export interface StateWrite {
  changed: boolean
  /** The version the row has now (bigint as a string); null only when the row could not be read. */
  version: string | null
}

/** What a stop writes on a `running` row (`polling_reaktors as p`): an operator's stop and a cold start's alike. */
function stopColumns (at: Date): RawBuilder<unknown> {
  return sql`state = 'stopped', next_run = null, owner = null, updated_at = ${at}::timestamptz,
    state_version = p.state_version + 1`
}

/** Per reaktor id: whether its state changed, and its row's version after the write. */
export type Versions = Map<string, StateWrite>

interface VersionRow { reaktor_id: string, state_version: string }

/**
 * Writes a start (awaited before the caller is answered) and announces it. Only a `stopped` (or
 * missing) row changes: the first run is due at once. `changed` is false when it was already running.
 */
export async function writeStart (db: Kysely<Database>, id: string, interval: string, at: Date, partition: number | null = null): Promise<StateWrite> {
  return (await startRows(db, [id], [interval], [partition], at)).get(id) ?? { changed: false, version: null }
}

/**
 * Writes a stop (awaited before the caller is answered) and announces it. `changed` is false when
 * it was already stopped; `version` is the row's version either way (the caller refuses to start a
 * runner from any older read of the row: that read predates this stop).
 */
export async function writeStop (db: Kysely<Database>, id: string, interval: string, at: Date, partition: number | null = null): Promise<StateWrite> {
  return (await stopRows(db, [id], [interval], [partition], at)).get(id) ?? { changed: false, version: null }
}

/**
 * The start of writeStart and of a bulk start: a `stopped` (or missing) row becomes `running`, its
 * first run due at once. Only the rows that changed are in the result.
 */
export async function startRows (db: Kysely<Database>, ids: readonly string[], intervals: readonly string[], partitions: ReadonlyArray<number | null>, at: Date): Promise<Versions> {
  // The NOTIFY is sent on commit of this very statement: no listener can see it before the row.
  const { rows } = await sql<VersionRow>`
    with changed as (
      insert into polling_reaktors as p (reaktor_id, state, interval, next_run, updated_at, state_version, partition)
      select v.id, 'running', v.interval, ${at}::timestamptz, ${at}::timestamptz, 1, v.partition
      from unnest(${ids}::text[], ${intervals}::text[], ${partitions}::int[]) as v(id, interval, partition)
      on conflict (reaktor_id) do update
        set state = 'running', interval = excluded.interval, next_run = excluded.next_run,
            updated_at = excluded.updated_at, owner = null, state_version = p.state_version + 1,
            partition = coalesce(excluded.partition, p.partition)
        where p.state = 'stopped'
      returning p.reaktor_id, p.state_version
    )
    select reaktor_id, state_version, pg_notify(${NOTIFY_CHANNEL}, reaktor_id) from changed
  `.execute(db)
  return new Map(rows.map((r) => [r.reaktor_id, { changed: true, version: String(r.state_version) }]))
}

/**
 * The stop of writeStop and of a bulk stop: a `running` row becomes `stopped`; every other one
 * keeps its state (a missing row is created stopped) and reports its version, which the caller's
 * runners must not fall behind (any older read of the row predates this stop).
 */
export async function stopRows (db: Kysely<Database>, ids: readonly string[], intervals: readonly string[], partitions: ReadonlyArray<number | null>, at: Date): Promise<Versions> {
  const { rows: stopped } = await sql<VersionRow>`
    with changed as (
      update polling_reaktors as p
      set ${stopColumns(at)}
      where p.reaktor_id = any(${ids}::text[]) and p.state = 'running'
      returning p.reaktor_id, p.state_version
    )
    select reaktor_id, state_version, pg_notify(${NOTIFY_CHANNEL}, reaktor_id) from changed
  `.execute(db)
  const versions: Versions = new Map(stopped.map((r) => [r.reaktor_id, { changed: true, version: String(r.state_version) }]))
  const rest = ids.flatMap((id, i) => versions.has(id) ? [] : [i])
  if (rest.length === 0) return versions
  const restIds = rest.map((i) => ids[i])
  // The rows inserted here are not visible to the second select of the same statement: no id twice.
  const { rows: current } = await sql<VersionRow>`
    with inserted as (
      insert into polling_reaktors (reaktor_id, state, interval, updated_at, partition)
      select v.id, 'stopped', v.interval, ${at}::timestamptz, v.partition
      from unnest(${restIds}::text[], ${rest.map((i) => intervals[i])}::text[], ${rest.map((i) => partitions[i])}::int[]) as v(id, interval, partition)
      on conflict (reaktor_id) do nothing
      returning reaktor_id, state_version
    )
    select reaktor_id, state_version from inserted
    union all
    select reaktor_id, state_version from polling_reaktors where reaktor_id = any(${restIds}::text[])
  `.execute(db)
  for (const r of current) versions.set(r.reaktor_id, { changed: false, version: String(r.state_version) })
  return versions
}

/**
 * Stops the running rows of ids no longer registered (an app version that dropped them), with the
 * NOTIFY of any stop. Every node switching to that version writes it; the first one changes the
 * rows, which it returns (for its audit row), and the others find them stopped.
 */
export async function stopUnregistered (db: Kysely<Database>, ids: readonly string[], at: Date): Promise<string[]> {
  if (ids.length === 0) return []
  const { rows } = await sql<{ reaktor_id: string }>`
    with changed as (
      update polling_reaktors as p
      set ${stopColumns(at)}
      where p.reaktor_id = any(${ids}::text[]) and p.state = 'running'
      returning p.reaktor_id
    )
    select reaktor_id, pg_notify(${NOTIFY_CHANNEL}, reaktor_id) from changed
  `.execute(db)
  return rows.map((r) => r.reaktor_id).sort()
}

/**
 * Whether another node held a partition with running reaktors when it was last seen: no node
 * holds the membership lock, yet some did not shut down cleanly (a shutdown clears its owners).
 * Either the whole cluster crashed, or the nodes are only disconnected (a database restart) and
 * about to reconnect: a booting node then waits a little before it calls it a cold start.
 */
export async function othersOwnedRunning (db: Kysely<Database>, nodeId: string): Promise<boolean> {
  const { rows } = await sql<{ found: boolean }>`
    select exists (
      select 1 from reaktor_partitions as rp
      where rp.owner is not null and rp.owner <> ${nodeId}
        and exists (select 1 from polling_reaktors as p where p.partition = rp.partition and p.state = 'running')
    ) as found
  `.execute(db)
  return rows[0]?.found === true
}

/** At shutdown: nothing names this node any more (which is what tells a clean stop from a crash). */
export async function releaseOwner (db: Kysely<Database>, nodeId: string): Promise<void> {
  await sql`update reaktor_partitions set owner = null where owner = ${nodeId}`.execute(db)
  await sql`update polling_reaktors set owner = null where owner = ${nodeId}`.execute(db)
}

/*
 * Array parameters of the batched write, as PostgreSQL array literals built here: pg's generic
 * array encoding (a regular expression per element) was the hottest part of a flush, and a flush
 * runs on the same thread as every reaktor's timer. Inside double quotes only `"` and `\` need a
 * backslash; NULL is the bare word.
 */
export function textArray (values: ReadonlyArray<string | null>): string {
  let out = '{'
  for (let i = 0; i < values.length; i++) {
    const v = values[i]
    if (i > 0) out += ','
    out += v === null ? 'NULL' : '"' + (/["\\]/.test(v) ? v.replace(/["\\]/g, '\\$&') : v) + '"'
  }
  return out + '}'
}

/** An epoch-ms time as ISO text: exact to the millisecond by construction, no float arithmetic on the way. */
export function isoTime (ms: number | null): string | null {
  if (ms === null) return null
  if (!Number.isFinite(ms)) throw Object.assign(new TypeError(`not a time: ${ms}`), { code: '22023' })
  return new Date(ms).toISOString()
}

export function numberArray (values: readonly number[]): string {
  for (const v of values) if (!Number.isFinite(v)) throw Object.assign(new TypeError(`not a finite number: ${v}`), { code: '22023' })
  return '{' + values.join(',') + '}'
}
