/**
 * The restart rules' audit line: a cluster cold start that stops running reaktors whose autoStart
 * is false names each of them in one `polling.restart_reset` line; a node joining a live cluster
 * changes nothing and writes none.
 */
import t from 'tap'
import { insertAudit } from '../../src/audit/record.js'
import { memoryLogger, type LogLine } from '../helpers/log.js'
import { openTestDatabase, probe, registry, row, scheduler } from '../helpers/scheduler.js'

function audits (lines: LogLine[]): Array<{ level: string, msg?: string, audit: unknown }> {
  return lines.filter((l) => (l.obj as { audit?: unknown }).audit !== undefined).map((l) => ({ level: l.level, msg: l.msg, audit: (l.obj as { audit: unknown }).audit }))
}

t.test('a cold start writes polling.restart_reset naming each reaktor it stopped; a joining node writes none', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const at = new Date()
  await db.insertInto('polling_reaktors').values([
    { reaktor_id: 'manual-b', state: 'running', interval: '1h', next_run: at, updated_at: at },
    { reaktor_id: 'manual-a', state: 'running', interval: '1h', next_run: at, updated_at: at },
    { reaktor_id: 'manual-idle', state: 'stopped', interval: '1h', updated_at: at },
    { reaktor_id: 'auto', state: 'running', interval: '1h', next_run: at, updated_at: at }
  ]).execute()
  const reaktors = registry([
    ...['manual-a', 'manual-b', 'manual-idle', 'manual-new'].map((id) => probe(id, () => false, { interval: '1h' }).registration),
    probe('auto', () => false, { interval: '1h', autoStart: true }).registration
  ])

  const firstLog = memoryLogger()
  const first = scheduler(t, db, url, { reaktors, log: firstLog, nodeId: 'node-a', auditWriter: async (r) => { await insertAudit(db, r) } })
  await first.start()
  t.equal(first.coldStart, true)
  t.same(audits(firstLog.lines), [{
    level: 'info',
    msg: 'audit: polling.restart_reset',
    audit: { action: 'polling.restart_reset', targets: ['manual-a', 'manual-b'], user: null, address: null, node: 'node-a', details: { reason: 'cluster cold start: autoStart is false' } }
  }], 'one line, naming exactly the reaktors the reset stopped, no user')
  t.same(await db.selectFrom('audit').select(['action', 'actor', 'address', 'node', 'targets', 'details']).execute(), [
    { action: 'polling.restart_reset', actor: null, address: null, node: 'node-a', targets: ['manual-a', 'manual-b'], details: { reason: 'cluster cold start: autoStart is false' } }
  ], 'and one row of the audit table, no actor')
  for (const id of ['manual-a', 'manual-b']) t.equal((await row(db, id))?.state, 'stopped', `${id} was stopped`)
  t.equal((await row(db, 'auto'))?.state, 'running', 'autoStart reaktors keep running')

  // Running again, then a second node joins the live cluster: the rules are not applied, no line.
  t.equal(await first.startReaktor('manual-a'), true)
  const secondLog = memoryLogger()
  const second = scheduler(t, db, url, { reaktors, log: secondLog, nodeId: 'node-b' })
  await second.start()
  t.equal(second.coldStart, false)
  t.same(audits(secondLog.lines), [], 'a join resets nothing and writes no audit line')
  t.equal((await db.selectFrom('audit').select('id').execute()).length, 1, 'nor a row')
  t.equal((await row(db, 'manual-a'))?.state, 'running')
})

t.test('a reset whose audit row cannot be stored still happens: its one line is an error carrying the entry', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const at = new Date()
  await db.insertInto('polling_reaktors').values({ reaktor_id: 'manual', state: 'running', interval: '1h', next_run: at, updated_at: at }).execute()
  const log = memoryLogger()
  const s = scheduler(t, db, url, {
    reaktors: registry([probe('manual', () => false, { interval: '1h' }).registration]),
    log,
    auditWriter: async () => { throw new Error('audit table unavailable') }
  })
  await s.start()
  t.equal((await row(db, 'manual'))?.state, 'stopped', 'the reset is not undone')
  const lines = audits(log.lines)
  t.equal(lines.length, 1, 'one audit line')
  t.equal(lines[0].level, 'error')
  t.match(lines[0].msg, /not stored in the audit table/)
  t.match(lines[0].audit, { action: 'polling.restart_reset', targets: ['manual'], user: null })
  t.match((log.lines.find((l) => l.msg === lines[0].msg)?.obj as { err?: Error }).err?.message, 'audit table unavailable', 'with the reason')
})
