/**
 * Partitions across versions and configurations: a node configured with another partition count
 * refuses to start; the previous version (one advisory lock per reaktor) and this one never run
 * side by side; a database of the previous version moves to partitions on upgrade.
 */
import t from 'tap'
import { Migrator, sql } from 'kysely'
import pg from 'pg'
import { loadConfig } from '../../src/config.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { migrations } from '../../src/db/migrations/index.js'
import { MEMBERSHIP_KEY, PARTITIONED_PROTOCOL_KEY } from '../../src/scheduler/ownership/keys.js'
import { CLUSTER_LOCK_NAMESPACE, DEFAULT_PARTITIONS, LegacyNodeRunning, partitionOf, PartitionCountMismatch, REAKTOR_LOCK_NAMESPACE } from '../../src/scheduler/index.js'
import { waitFor } from '../helpers/timing.js'
import { openTestDatabase, probe, registry, row, scheduler } from '../helpers/scheduler.js'

t.test('PARTITIONS: validated, stored at the first start, and a node configured differently refuses to start', async (t) => {
  t.throws(() => loadConfig({ PARTITIONS: '0' }), /PARTITIONS: "0" is not allowed; expected an integer from 1 to 65536/)
  t.throws(() => loadConfig({ PARTITIONS: 'many' }), /PARTITIONS/)
  t.equal(loadConfig({}).partitions, undefined, 'unset: whatever the cluster stores')
  t.equal(loadConfig({ PARTITIONS: '64' }).partitions, 64)

  const { url, db } = await openTestDatabase(t)
  const first = scheduler(t, db, url, { partitions: 64, reaktors: registry([probe('x', () => false).registration]) })
  await first.start()
  t.equal(first.partitions, 64)
  t.same(await db.selectFrom('reaktor_cluster').select(['partitions', 'partition_hash']).execute(), [{ partitions: 64, partition_hash: 'fnv1a32-utf8' }])
  t.equal((await row(db, 'x'))!.partition, partitionOf('x', 64))

  const other = scheduler(t, db, url, { nodeId: 'node-b', partitions: 256, reaktors: registry([probe('x', () => false).registration]) })
  await t.rejects(other.start(), PartitionCountMismatch)
  await t.rejects(scheduler(t, db, url, { nodeId: 'node-c', partitions: 256, reaktors: new Map() }).start(),
    /PARTITIONS=256 does not match this cluster: its database was first started with 64 partitions.*Unset PARTITIONS or set it to 64/)
  const unset = scheduler(t, db, url, { nodeId: 'node-d', reaktors: registry([probe('x', () => false).registration]) })
  await unset.start()
  t.equal(unset.partitions, 64, 'a node without PARTITIONS adopts the stored count')
})

t.test('a node of the previous version alive on the database: this version refuses to start, and stands aside if one appears', async (t) => {
  const { url, db } = await openTestDatabase(t)
  // What a node of the previous version holds: the membership lock, shared, and per-reaktor locks.
  const legacy = new pg.Client({ connectionString: url })
  await legacy.connect()
  t.teardown(async () => await legacy.end().catch(() => {}))
  await legacy.query('select pg_advisory_lock_shared($1, 0), pg_advisory_lock($2, 12345)', [CLUSTER_LOCK_NAMESPACE, REAKTOR_LOCK_NAMESPACE])
  const p = probe('work', () => false, { interval: '100ms', autoStart: true })
  const refused = scheduler(t, db, url, { reaktors: registry([p.registration]) })
  await t.rejects(refused.start(), LegacyNodeRunning)
  t.equal(p.runs.length, 0, 'nothing ran')
  await legacy.end()

  const s = scheduler(t, db, url, { nodeId: 'node-b', reaktors: registry([p.registration]) })
  await s.start()
  await waitFor(() => p.runs.length >= 2, { what: 'runs' })
  // One appears later (a deploy racing this one): this node gives everything back meanwhile.
  const late = new pg.Client({ connectionString: url })
  await late.connect()
  t.teardown(async () => await late.end().catch(() => {}))
  await late.query('select pg_advisory_lock_shared($1, 0)', [CLUSTER_LOCK_NAMESPACE])
  await waitFor(() => s.heldPartitions().length === 0, { what: 'the partitions given back' })
  t.match(s.problem, /earlier reaktor-service version/)
  const runs = p.runs.length
  await late.end()
  await waitFor(() => s.problem === undefined && s.heldPartitions().length === DEFAULT_PARTITIONS, { what: 'the partitions taken again' })
  await waitFor(() => p.runs.length > runs, { what: 'runs again' })
  t.equal(p.maxActive(), 1)
})

t.test('a session that shows its membership without the protocol mark in one pass only (a node releasing its locks one by one) is no earlier version', async (t) => {
  const { url, db, queries } = await openTestDatabase(t)
  const p = probe('steady', () => false, { interval: '1h', autoStart: true })
  // No periodic pass: the test asks for each one.
  const s = scheduler(t, db, url, { reaktors: registry([p.registration]), reconcileIntervalMs: 60_000 })
  await s.start()
  await waitFor(() => s.heldPartitions().length === DEFAULT_PARTITIONS, { what: 'every partition held' })
  const passes = (): number => queries.filter((q) => /from pg_locks/.test(q.query.sql) && /reaktor_nodes/.test(q.query.sql)).length
  const pass = async (): Promise<void> => {
    const before = passes()
    s.requestReconcile()
    await waitFor(() => passes() > before, { what: 'a full pass to read the locks' })
    // What the pass does with that read happens in the turns right after it.
    for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve))
  }
  // A node of this version in the middle of releasing its locks: the mark already gone, the membership not yet.
  const ending = new pg.Client({ connectionString: url })
  await ending.connect()
  t.teardown(async () => await ending.end().catch(() => {}))
  await ending.query('select pg_advisory_lock_shared($1, $2), pg_advisory_lock_shared($1, $3)', [CLUSTER_LOCK_NAMESPACE, PARTITIONED_PROTOCOL_KEY, MEMBERSHIP_KEY])
  await ending.query('select pg_advisory_unlock_shared($1, $2)', [CLUSTER_LOCK_NAMESPACE, PARTITIONED_PROTOCOL_KEY])
  await pass()
  t.equal(s.problem, undefined, 'one sighting is no earlier-version node')
  t.equal(s.heldPartitions().length, DEFAULT_PARTITIONS, 'nothing given back')
  await ending.end()
  await pass()
  t.equal(s.problem, undefined, 'gone by the next pass: never one')
  t.equal(p.maxActive(), 1)
})

t.test('upgrade: a database of the previous version moves to partitions; the previous version refuses the migrated database', async (t) => {
  const { url, db } = await openTestDatabase(t)
  // Back to the schema of the previous version, with rows as its nodes left them.
  const down = await new Migrator({ db, provider: { getMigrations: async () => migrations } }).migrateTo('20261124000000_polling')
  t.equal(down.error, undefined)
  t.same(down.results?.map((r) => r.migrationName).filter((name) => name === '20261125000000_partitions'), ['20261125000000_partitions'])
  await sql`
    insert into polling_reaktors (reaktor_id, state, interval, next_run, last_run, owner, state_version)
    values ('kept', 'running', '100ms', now(), now() - interval '1 s', 'old-node', 3),
           ('halted', 'stopped', '100ms', null, now() - interval '1 h', null, 2)
  `.execute(db)

  await migrateToLatest(db)
  const kept = probe('kept', () => false, { interval: '100ms', autoStart: false })
  const halted = probe('halted', () => false, { interval: '100ms', autoStart: true })
  const s = scheduler(t, db, url, { reaktors: registry([kept.registration, halted.registration]), coldStartSettleMs: 0 })
  await s.start()
  t.equal(s.coldStart, true, 'the first start of the new version is a cold start (every old node was stopped)')
  t.match(await row(db, 'halted'), { state: 'stopped', partition: partitionOf('halted', DEFAULT_PARTITIONS) }, 'the operator\'s stop stands')
  t.match(await row(db, 'kept'), { state: 'stopped' }, 'the restart rules apply as at any cold start (running, autoStart false → stopped)')
  await s.startReaktor('kept')
  await waitFor(() => kept.runs.length >= 2, { what: 'the reaktor to run under its partition' })
  t.equal(halted.runs.length, 0)

  const previous = Object.fromEntries(Object.entries(migrations).filter(([name]) => name < '20261125000000'))
  const old = await new Migrator({ db, provider: { getMigrations: async () => previous } }).migrateToLatest()
  t.match(String(old.error), /corrupted migrations.*20261125000000_partitions/, 'the previous version cannot start on the migrated database')
})
