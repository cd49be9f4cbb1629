/**
 * The audit pruner: rows older than AUDIT_RETENTION go, in statements of at most a chunk, and
 * only those; 0 keeps everything; a failure is logged and the next tick tries again; two nodes
 * pruning at once delete each row once, without errors.
 */
import t from 'tap'
import { sql, type Kysely } from 'kysely'
import { AuditPruner, type AuditPrunerOptions } from '../../src/audit/pruner.js'
import type { Database } from '../../src/db/schema.js'
import type { TestContext } from '../helpers/test-context.js'
import { waitFor } from '../helpers/timing.js'
import { memoryLogger } from '../helpers/log.js'
import { openTestDatabase } from '../helpers/scheduler.js'

const DAY_MS = 86_400_000
const RETENTION_MS = 90 * DAY_MS

/** `count` rows recorded `daysAgo` days ago (the `at` set back in the database); `tag` in their targets. */
async function insertRows (db: Kysely<Database>, count: number, daysAgo: number, tag: string): Promise<void> {
  await sql`
    insert into audit (at, action, actor, address, node, targets)
    select now() - ${`${daysAgo} days`}::interval, 'polling.start', 'alice', '127.0.0.1', 'node-a', array[${tag}]
    from generate_series(1, ${count})
  `.execute(db)
}

async function countByTag (db: Kysely<Database>): Promise<Record<string, number>> {
  const { rows } = await sql<{ tag: string, n: string }>`select targets[1] as tag, count(*) as n from audit group by 1 order by 1`.execute(db)
  return Object.fromEntries(rows.map((r) => [r.tag, Number(r.n)]))
}

function pruner (t: TestContext, opts: Partial<AuditPrunerOptions> & Pick<AuditPrunerOptions, 'db'>): AuditPruner {
  const p = new AuditPruner({ retentionMs: RETENTION_MS, log: memoryLogger(), ...opts })
  t.teardown(async () => await p.stop())
  return p
}

t.test('deletes the rows past the retention, oldest first, at most a chunk per statement; newer rows stay', async (t) => {
  const { db } = await openTestDatabase(t)
  await insertRows(db, 12_345, 91, 'old')
  await insertRows(db, 7, 89, 'kept-89d')
  await insertRows(db, 5, 0, 'new')
  const p = pruner(t, { db })
  p.start()
  await waitFor(() => p.passes >= 1, { what: 'the first pass' })
  t.equal(p.deleted, 12_345, 'every row older than 90 days')
  t.equal(p.statements, 3, '5,000 + 5,000 + 2,345: three statements of at most 5,000 rows')
  t.same(await countByTag(db), { 'kept-89d': 7, new: 5 }, 'rows inside the retention are kept')
})

t.test('AUDIT_RETENTION 0 keeps every row: the pruner never runs', async (t) => {
  const { db } = await openTestDatabase(t)
  await insertRows(db, 10, 4000, 'ancient')
  const off = pruner(t, { db, retentionMs: 0, everyMs: 10 })
  // A pruner that deletes nothing here (its retention is longer than the rows' age), started with
  // the same delays: once it has made three passes, the other had every chance to make one.
  const witness = pruner(t, { db, retentionMs: 5000 * DAY_MS, everyMs: 10 })
  off.start()
  witness.start()
  await waitFor(() => witness.passes >= 3, { what: 'three passes of the witness' })
  t.ok(witness.statements >= 3, 'the witness ran its statements')
  t.equal(off.passes, 0, 'no pass')
  t.equal(off.statements, 0, 'no statement')
  t.same(await countByTag(db), { ancient: 10 })
})

t.test('a failed pass is logged as a warning and tried again at the next tick', async (t) => {
  const { db } = await openTestDatabase(t)
  await insertRows(db, 20, 100, 'old')
  await sql`alter table audit rename to audit_away`.execute(db)
  const log = memoryLogger()
  const p = pruner(t, { db, log, everyMs: 50 })
  p.start()
  const warning = await waitFor(() => log.lines.find((l) => l.level === 'warn'), { what: 'the warning' })
  t.match(warning.msg, /could not prune the audit table; retrying/)
  t.match((warning.obj as { err: Error }).err.message, /audit/)
  t.equal(p.deleted, 0)
  await sql`alter table audit_away rename to audit`.execute(db)
  await waitFor(() => p.deleted === 20, { what: 'the retried pass' })
  t.same(await countByTag(db), {}, 'the retry deleted them')
})

t.test('two nodes pruning at once delete every old row once, with no error', async (t) => {
  const { db } = await openTestDatabase(t)
  await insertRows(db, 6000, 120, 'old')
  await insertRows(db, 3, 1, 'new')
  const log = memoryLogger()
  const a = pruner(t, { db, log, chunk: 500 })
  const b = pruner(t, { db, log, chunk: 500 })
  a.start()
  b.start()
  await waitFor(() => a.passes >= 1 && b.passes >= 1, { what: 'both passes' })
  t.equal(a.deleted + b.deleted, 6000, `each row deleted once (${a.deleted} + ${b.deleted})`)
  t.same(log.lines.filter((l) => l.level !== 'info'), [], 'no warning')
  t.same(await countByTag(db), { new: 3 })
})
