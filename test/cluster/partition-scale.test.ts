/**
 * Ownership at scale: more reaktors than PostgreSQL can lock one by one (its shared lock table
 * holds about 10,000–15,000 advisory locks with default settings), and what a node does when
 * PostgreSQL refuses a lock anyway (a server configured with a tiny lock table).
 */
import t from 'tap'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { sql } from 'kysely'
import pg from 'pg'
import { startEmbeddedPostgres } from '../../src/db/embedded.js'
import { DEFAULT_PARTITIONS } from '../../src/scheduler/index.js'
import type { PollingReaktorRegistration } from '../../src/sdk/types.js'
import { build } from '../helpers/app.js'
import { deadline, waitFor } from '../helpers/timing.js'
import { memoryLogger, silentLogger } from '../helpers/log.js'
import { database, openTestDatabase, partitionLocks, registry, scheduler } from '../helpers/scheduler.js'

/** n light reaktors (no trace per run): each counts its runs. */
function fleet (n: number): { reaktors: ReturnType<typeof registry>, runs: Int32Array } {
  const runs = new Int32Array(n)
  const pollingReaktors: PollingReaktorRegistration[] = Array.from({ length: n }, (_v, i) => ({
    reaktorDefinitionId: `fleet-${i}`,
    interval: '1h',
    autoStart: true,
    createReaktor: () => () => { runs[i]++; return false }
  }))
  return { reaktors: registry(pollingReaktors, {}, 'fleet'), runs }
}

t.test('20,000 reaktors on one node: all of them run, under one lock per partition', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const { reaktors, runs } = fleet(20_000)
  const log = memoryLogger()
  const s = scheduler(t, db, url, { reaktors, log, flushIntervalMs: 200 })
  const started = Date.now()
  await s.start()
  await waitFor(() => runs.every((r) => r >= 1), { timeoutMs: deadline(60_000), intervalMs: 100, what: 'every reaktor to run once' }).catch((err: Error) => {
    throw new Error(`${err.message}: ${runs.filter((r) => r >= 1).length} ran, ${s.ownedReaktorIds().length} owned, ${s.heldPartitions().length} partitions held`)
  })
  t.pass(`all 20,000 ran once ${Date.now() - started} ms after start()`)
  t.equal(s.ownedReaktorIds().length, 20_000)
  const { rows } = await sql<{ locks: number }>`select count(*)::int as locks from pg_locks where pid = ${s.lockConnectionPid!} and locktype = 'advisory'`.execute(db)
  t.ok(rows[0].locks <= DEFAULT_PARTITIONS + 2, `the node holds ${rows[0].locks} advisory locks: its partitions and its membership, not one per reaktor`)
  t.same(log.lines.filter((l) => l.level === 'error'), [], 'no error logged')
  await waitFor(async () => (await sql<{ n: number }>`select count(*)::int as n from polling_reaktors where last_run is not null`.execute(db)).rows[0].n === 20_000,
    { timeoutMs: deadline(30_000), intervalMs: 200, what: 'every run result persisted' })
  t.ok(s.flushStats.flushes < 200, `in batches (${s.flushStats.flushes} statements for ${s.flushStats.rows} results)`)
})

t.test('a full lock table: the node keeps what it holds, backs off, says what to raise, and /readyz and /metrics show it', async (t) => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'reaktor-locktable-'))
  // The smallest lock table PostgreSQL allows: roughly 10 x (max_connections + workers) slots.
  const server = await startEmbeddedPostgres({
    dataDir,
    log: silentLogger,
    serverSettings: { max_locks_per_transaction: 10, max_connections: 20, max_worker_processes: 2, autovacuum_max_workers: 1, max_wal_senders: 0 }
  })
  t.teardown(async () => {
    await server.stop().catch(() => {})
    await fs.rm(dataDir, { recursive: true, force: true })
  })
  const app = await build(t, { databaseUrl: server.url, env: { PARTITIONS: '20000' }, scheduler: { lockRefusalBackoffMs: 400, reconcileIntervalMs: 200 } })
  await app.ready()
  const readyz = await waitFor(async () => {
    const res = await app.inject('/readyz')
    return res.statusCode === 503 ? res : undefined
  }, { what: '/readyz to report the refusal' })
  t.match(readyz.json(), { statusCode: 503, error: 'Service Unavailable', message: /refused advisory locks.*max_locks_per_transaction/ })
  const held = app.scheduler.heldPartitions().length
  t.ok(held > 0 && held < 20_000, `it keeps ${held} partitions`)
  // It gave some back: other sessions of the server can still connect and query.
  const probeClient = new pg.Client({ connectionString: server.url })
  await probeClient.connect()
  t.same((await probeClient.query('select count(*)::int as n from pg_class where relname = $1', ['polling_reaktors'])).rows, [{ n: 1 }], 'a new connection works')
  await probeClient.end()
  const metrics = (await app.inject('/metrics')).body
  t.match(metrics, /reaktor_polling_lock_refused\{[^}]*\} 1/)
  t.match(metrics, /reaktor_polling_lock_refusals_total\{[^}]*\} [1-9]/)
  // No error loop: over the next 2 s the node retries a few times with a growing backoff.
  const before = app.scheduler.lockRefusals
  const until = Date.now() + 2000
  await waitFor(() => Date.now() >= until, { timeoutMs: deadline(5000), what: 'two seconds' })
  const retries = app.scheduler.lockRefusals - before
  t.ok(retries <= 3, `${retries} retries in 2 s (backoff 400 ms, doubling)`)
  t.ok(app.scheduler.connected, 'its lock connection is still up')
  t.ok(app.scheduler.heldPartitions().length >= held - 64, `and it still holds most of what it had (${app.scheduler.heldPartitions().length})`)
  const { db } = database(t, server.url)
  await waitFor(async () => (await partitionLocks(db)).size === app.scheduler.heldPartitions().length, { what: 'pg_locks to agree with its bookkeeping' })
})
