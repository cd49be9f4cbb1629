import { Kysely, PostgresDialect, sql, type LogEvent } from 'kysely'
import pg from 'pg'
import { buildRegistry } from '../../src/apps/registry.js'
import type { LoadedApp, RegisteredPollingReaktor } from '../../src/apps/types.js'
import type { Database } from '../../src/db/schema.js'
import { survivesLostConnections } from '../../src/db/index.js'
import { readStatuses } from '../../src/polling/status.js'
import type { PollingStatusType } from '../../src/schemas/polling.js'
import { Scheduler, PARTITION_CHANNEL, PARTITION_LOCK_NAMESPACE, type SchedulerLogger, type SchedulerOptions } from '../../src/scheduler/index.js'
import type { AktorContext, PollingReaktorRegistration } from '../../src/sdk/types.js'
import type { SchedulerOverrides } from '../../src/plugins/scheduler.js'
import type { TestContext } from './test-context.js'
import { createTestDatabase } from './database.js'
import { memoryLogger, silentLogger } from './log.js'

/**
 * Scheduler timings for tests that need runs, reconciles and result writes to follow each other
 * quickly (the service's defaults: a 3 s minimum interval, a reconcile every second, results
 * written every 200 ms).
 */
export const FAST_SCHEDULER = { minIntervalMs: 50, reconcileIntervalMs: 200, flushIntervalMs: 50, now: schedulerClock } satisfies SchedulerOverrides

let lastReading = NaN

/**
 * The schedulers' clock in tests: Date.now, keeping its last reading. A runner reads the clock for
 * a run's lastRun and calls the aktor in the same synchronous step, so the last reading when a
 * probe starts is exactly the lastRun the scheduler stores. A probe reading Date.now() itself
 * could land a millisecond later (or more across a GC pause), and an exact comparison of the two
 * failed now and then; a tolerance would be a guess.
 */
export function schedulerClock (): number {
  lastReading = Date.now()
  return lastReading
}

/** The registrations as the service indexes them, for a test app (`test-app` unless named) with these settings. */
export function registry (registrations: PollingReaktorRegistration[], settings: Record<string, unknown> = {}, appName = 'test-app'): Map<string, RegisteredPollingReaktor> {
  const app: LoadedApp = { name: appName, version: '1.0.0', dir: undefined, publicDir: undefined, settings, pollingReaktors: registrations, reaktors: [] }
  return buildRegistry([app], silentLogger).pollingReaktors
}

export interface RunTrace {
  n: number
  runId: string
  /** The probe's own clock reading at the start (for gaps and timing). */
  start: number
  /** The scheduler's clock reading for this run, which it stores as lastRun (see schedulerClock). */
  lastRun: number
  end?: number
  context: AktorContext
  aborted?: unknown
}

/**
 * A polling reaktor that records every run (start, end, context, abort reason) and how many runs
 * were in flight at once. `behaviour(n, context)` decides what run n (1-based) does.
 */
export function probe (
  reaktorDefinitionId: string,
  behaviour: (n: number, context: AktorContext) => unknown,
  extra: Partial<PollingReaktorRegistration> = {}
): { registration: PollingReaktorRegistration, runs: RunTrace[], factoryCalls: () => number, maxActive: () => number } {
  const runs: RunTrace[] = []
  let active = 0
  let maxActive = 0
  let factoryCalls = 0
  const registration: PollingReaktorRegistration = {
    reaktorDefinitionId,
    interval: '1s',
    ...extra,
    createReaktor: () => {
      factoryCalls++
      return async (_input, context) => {
        const trace: RunTrace = { n: runs.length + 1, runId: context.runId, start: Date.now(), lastRun: lastReading, context }
        runs.push(trace)
        context.signal.addEventListener('abort', () => { trace.aborted = context.signal.reason })
        active++
        maxActive = Math.max(maxActive, active)
        try {
          return await behaviour(trace.n, context) as boolean
        } finally {
          active--
          trace.end = Date.now()
        }
      }
    }
  }
  return { registration, runs, factoryCalls: () => factoryCalls, maxActive: () => maxActive }
}

/** Resolves after `ms`, or as soon as the signal aborts (what a well-behaved aktor does). */
export async function work (ms: number, signal?: AbortSignal): Promise<void> {
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms)
    signal?.addEventListener('abort', () => { clearTimeout(timer); resolve() }, { once: true })
  })
}

/** Never resolves on its own: settles only when the run's signal aborts. */
export async function untilAborted (signal: AbortSignal): Promise<boolean> {
  return await new Promise<boolean>((resolve) => signal.addEventListener('abort', () => resolve(true), { once: true }))
}

/** A Kysely on its own pool, destroyed at teardown; `queries` records every statement. */
export function database (t: TestContext, url: string): { db: Kysely<Database>, queries: LogEvent[], pool: pg.Pool } {
  const queries: LogEvent[] = []
  const pool = new pg.Pool({ connectionString: url, max: 5 })
  survivesLostConnections(pool)
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }), log: (event) => { queries.push(event) } })
  t.teardown(async () => await db.destroy())
  return { db, queries, pool }
}

/** A fresh test database (createTestDatabase), opened with `database`. */
export async function openTestDatabase (t: TestContext): Promise<{ url: string, db: Kysely<Database>, queries: LogEvent[], pool: pg.Pool }> {
  const url = await createTestDatabase(t)
  return { url, ...database(t, url) }
}

export type TestSchedulerOptions = Omit<SchedulerOptions, 'db' | 'databaseUrl' | 'log' | 'nodeId'> & {
  nodeId?: string
  log?: SchedulerLogger
}

/** A scheduler for tests, with `status(id)`: what the API would show, read as the service reads it. */
export type TestScheduler = Scheduler & { status: (reaktorId: string) => Promise<PollingStatusType> }

/** A scheduler with fast test knobs, stopped at teardown (before the database is dropped). */

export function scheduler (t: TestContext, db: Kysely<Database>, databaseUrl: string, opts: TestSchedulerOptions): TestScheduler {
  const s = new Scheduler({
    db,
    databaseUrl,
    nodeId: 'node-a',
    log: memoryLogger(),
    ...FAST_SCHEDULER,
    shutdownGraceMs: 2000,
    reconnectMinMs: 50,
    ...opts
  })
  t.teardown(async () => await s.stop())
  const status = async (reaktorId: string): Promise<PollingStatusType> =>
    (await readStatuses({ db, reaktors: opts.reaktors, minIntervalMs: s.minIntervalMs }, [reaktorId]))[0]
  return Object.assign(s, { status })
}

export interface AdvisoryLockRow { pid: number, granted: boolean }

/**
 * The ownership lock of a reaktor id as pg_locks shows it: the lock of its partition (two-int
 * form: classid, objid, objsubid 2), the partition as stored in its row.
 */
export async function reaktorLocks (db: Kysely<Database>, reaktorId: string): Promise<AdvisoryLockRow[]> {
  const { rows } = await sql<AdvisoryLockRow>`
    select pid, granted from pg_locks
    where locktype = 'advisory' and database = (select oid from pg_database where datname = current_database())
      and classid = ${PARTITION_LOCK_NAMESPACE}::bigint::oid
      and objid = (select partition from polling_reaktors where reaktor_id = ${reaktorId})::bigint::oid
      and objsubid = 2
  `.execute(db)
  return rows
}

/** Every partition lock in this database: partition → holding pids. */
export async function partitionLocks (db: Kysely<Database>): Promise<Map<number, number[]>> {
  const { rows } = await sql<{ partition: number, pid: number }>`
    select objid::bigint::int as partition, pid from pg_locks
    where locktype = 'advisory' and database = (select oid from pg_database where datname = current_database())
      and classid = ${PARTITION_LOCK_NAMESPACE}::bigint::oid and objsubid = 2 and granted
  `.execute(db)
  const held = new Map<number, number[]>()
  for (const r of rows) held.set(r.partition, [...(held.get(r.partition) ?? []), r.pid])
  return held
}

export async function row (db: Kysely<Database>, reaktorId: string): Promise<Record<string, any> | undefined> {
  return await db.selectFrom('polling_reaktors').selectAll().where('reaktor_id', '=', reaktorId).executeTakeFirst()
}

/**
 * Ends a lock session (pg_terminate_backend), waits in the same statement until PostgreSQL has
 * freed its locks (pg_locks polled every millisecond, for up to 5 s), then announces a free
 * partition: every other node starts a full pass at once, inside the moment in which the ended
 * session's node has not yet heard of the end. Resolves when the announcement is sent.
 */
export async function endSessionAndWakeNodes (sql: { query: (text: string) => Promise<unknown> }, pid: number): Promise<void> {
  await sql.query(`do $$ begin
    perform pg_terminate_backend(${Number(pid)});
    while exists (select 1 from pg_locks where pid = ${Number(pid)}) and clock_timestamp() < statement_timestamp() + interval '5 s' loop
      perform pg_sleep(0.001);
    end loop;
    perform pg_notify('${PARTITION_CHANNEL}', '1');
  end $$`)
}
