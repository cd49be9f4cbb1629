import t from 'tap'
import { randomUUID } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { sql, type Kysely } from 'kysely'
import type { Database, RunOutcomeName } from '../../src/db/schema.js'
import { ADMIN_ENV, loggedIn, type ApiCall } from '../helpers/auth.js'
import { build } from '../helpers/app.js'
import type { TestContext } from '../helpers/test-context.js'
import { waitFor } from '../helpers/timing.js'
import { createTestDatabase } from '../helpers/database.js'
import { probe } from '../helpers/scheduler.js'

const RUN_KEYS = ['durationMs', 'error', 'node', 'outcome', 'reaktorDefinitionId', 'runId', 'startedAt']
const BASE = Date.parse('2026-11-25T08:00:00.000Z')

/** Registered, never started: no run of the scheduler's own adds rows beside the ones a test writes. */
function registrations (...ids: string[]): Array<ReturnType<typeof probe>['registration']> {
  return ids.map((id) => probe(id, () => false, { interval: '1h' }).registration)
}

async function service (t: TestContext, ids: string[], databaseUrl?: string): Promise<{ app: FastifyInstance, call: ApiCall }> {
  const app = await build(t, { env: ADMIN_ENV, databaseUrl, apps: [{ name: 'runs-test', version: '1.0.0', pollingReaktors: registrations(...ids) }] })
  return { app, call: await loggedIn(app) }
}

interface Written { runId: string, startedAt: string, seq: string }

/**
 * Writes runs straight into polling_runs, in this order (so `seq` grows along the list), each at
 * the given start (text: PostgreSQL's microseconds stay exact).
 */
async function writeRuns (db: Kysely<Database>, reaktorId: string, starts: string[], outcome: RunOutcomeName = 'no_work'): Promise<Written[]> {
  if (starts.length === 0) return []
  const ids = starts.map(() => randomUUID())
  const { rows } = await sql<{ run_id: string, seq: string }>`
    insert into polling_runs (run_id, reaktor_id, node, started_at, duration_ms, outcome, error)
    select v.id, ${reaktorId}, 'node-x', v.started, 12, ${outcome}, case when ${outcome} = 'failed' then 'boom' end
    from unnest(${ids}::uuid[], ${starts}::timestamptz[]) with ordinality as v(id, started, n)
    order by v.n
    returning run_id, seq
  `.execute(db)
  const seqOf = new Map(rows.map((r) => [r.run_id, String(r.seq)]))
  return ids.map((runId, i) => ({ runId, startedAt: starts[i], seq: seqOf.get(runId)! }))
}

function at (ms: number): string {
  return new Date(BASE + ms).toISOString()
}

/** The run ids in the history's order, read from the table itself. */
async function expectedOrder (db: Kysely<Database>, reaktorId: string): Promise<string[]> {
  const { rows } = await sql<{ run_id: string }>`
    select run_id from polling_runs where reaktor_id = ${reaktorId} order by started_at desc, seq desc
  `.execute(db)
  return rows.map((r) => r.run_id)
}

/** Every page from `first` on, following nextBefore; `between` runs after each page. */
async function allPages (call: ApiCall, path: string, limit: number, between: () => Promise<void> = async () => {}): Promise<Array<{ runs: any[], nextBefore: string | null }>> {
  const pages = []
  let before: string | null = null
  for (let i = 0; i < 1000; i++) {
    const query: string = `?limit=${limit}` + (before === null ? '' : `&before=${encodeURIComponent(before)}`)
    const res = await call('GET', path + query)
    if (res.statusCode !== 200) throw new Error(`page ${i}: ${res.statusCode} ${JSON.stringify(res.body)}`)
    pages.push(res.body)
    before = res.body.nextBefore
    if (before === null) return pages
    await between()
  }
  throw new Error('paging never ended')
}

t.test('pages newest first across several pages: no repeat, no gap, ties in started_at broken by seq, nextBefore null at the end', async (t) => {
  const { app, call } = await service(t, ['pager'])
  // 23 runs: 15 at distinct times, and 8 sharing two starts (a `true` result starts the next run
  // in the same millisecond), written out of time order.
  const starts = [...Array.from({ length: 15 }, (_, i) => at(i * 1000)), ...Array.from({ length: 4 }, () => at(7500)), ...Array.from({ length: 4 }, () => at(20_000))]
  await writeRuns(app.db, 'pager', starts.slice(10))
  await writeRuns(app.db, 'pager', starts.slice(0, 10))
  const expected = await expectedOrder(app.db, 'pager')
  t.equal(expected.length, 23)

  const pages = await allPages(call, '/api/v1/polling/pager/runs', 3)
  t.same(pages.map((p) => p.runs.length), [3, 3, 3, 3, 3, 3, 3, 2], 'eight pages of at most 3')
  t.same(pages.flatMap((p) => p.runs.map((r: any) => r.runId)), expected, 'every run once, in (started_at desc, seq desc) order')
  t.ok(pages.slice(0, -1).every((p) => typeof p.nextBefore === 'string'), 'each full page but the last has a cursor')
  t.equal(pages.at(-1)!.nextBefore, null, 'the last page has none')

  const run = pages[0].runs[0]
  t.same(Object.keys(run).sort(), RUN_KEYS)
  t.same(run, { runId: expected[0], reaktorDefinitionId: 'pager', node: 'node-x', startedAt: at(20_000), durationMs: 12, outcome: 'no_work', error: null })

  // The tie groups: within one start, the run recorded later (higher seq) comes first.
  for (const tie of [at(20_000), at(7500)]) {
    const { rows } = await sql<{ run_id: string, seq: string }>`select run_id, seq from polling_runs where started_at = ${tie}::timestamptz`.execute(app.db)
    const bySeqDesc = rows.sort((a, b) => Number(b.seq) - Number(a.seq)).map((r) => r.run_id)
    const onPages = pages.map((p) => p.runs.filter((r: any) => r.startedAt === tie).length).filter((n) => n > 0)
    t.ok(onPages.length === 2, `the runs started at ${tie} are split across two pages (${onPages.join(' + ')}): the case seq is the tie-breaker for`)
    t.same(pages.flatMap((p) => p.runs).filter((r: any) => r.startedAt === tie).map((r: any) => r.runId), bySeqDesc, 'ties by seq, descending')
  }

  const whole = await call('GET', '/api/v1/polling/pager/runs')
  t.equal(whole.body.runs.length, 20, 'limit defaults to 20')
  t.type(whole.body.nextBefore, 'string')
  const max = await call('GET', '/api/v1/polling/pager/runs?limit=500')
  t.same(max.body.runs.map((r: any) => r.runId), expected, 'limit 500 is allowed')
  t.equal(max.body.nextBefore, null)
  const exact = await call('GET', '/api/v1/polling/pager/runs?limit=23')
  t.equal(exact.body.nextBefore, null, 'a page that ends exactly with the oldest run has no cursor')
})

t.test('a cursor holds the microsecond: runs one microsecond apart page apart', async (t) => {
  const { app, call } = await service(t, ['micro'])
  const written = await writeRuns(app.db, 'micro', ['2026-11-25T08:00:00.123455Z', '2026-11-25T08:00:00.123457Z', '2026-11-25T08:00:00.123456Z'])
  const pages = await allPages(call, '/api/v1/polling/micro/runs', 1)
  t.same(pages.flatMap((p) => p.runs.map((r: any) => r.runId)), [written[1].runId, written[2].runId, written[0].runId])
})

t.test('paging stays right while runs are appended and old ones pruned between and during the pages', async (t) => {
  const { app, call } = await service(t, ['busy'])
  await writeRuns(app.db, 'busy', Array.from({ length: 60 }, (_, i) => at(i * 1000)))
  const atStart = new Set(await expectedOrder(app.db, 'busy'))

  // A writer like the service's: after each page, two newer runs appended and the oldest pruned,
  // sent while the next page is being read.
  let writes = 0
  let next = 60
  let paging = true
  let wake = (): void => {}
  const writer = (async () => {
    for (;;) {
      await new Promise<void>((resolve) => { wake = resolve })
      if (!paging) return
      next += 2
      await writeRuns(app.db, 'busy', [at((next - 2) * 1000), at((next - 1) * 1000)])
      await sql`delete from polling_runs where seq in (select seq from polling_runs where reaktor_id = 'busy' order by started_at, seq limit 1)`.execute(app.db)
      writes++
    }
  })()
  let step = 0
  const pages = await allPages(call, '/api/v1/polling/busy/runs', 7, async () => {
    await waitFor(() => writes === step, { what: 'the previous write' })
    step++
    wake()
  })
  await waitFor(() => writes === step, { what: 'the last write' })
  paging = false
  wake()
  await writer
  const atEnd = new Set(await expectedOrder(app.db, 'busy'))

  const shown = pages.flatMap((p) => p.runs)
  t.equal(writes, pages.length - 1, `a write after each page but the last (${pages.length} pages)`)
  t.equal(new Set(shown.map((r) => r.runId)).size, shown.length, 'no run shown twice')
  const keys = shown.map((r) => Date.parse(r.startedAt))
  t.ok(keys.every((k, i) => i === 0 || k < keys[i - 1]), 'strictly older page after page (distinct starts here)')
  const throughout = [...atStart].filter((id) => atEnd.has(id))
  t.ok(throughout.length > 40 && atStart.size - throughout.length === writes, `${atStart.size - throughout.length} of the first runs pruned meanwhile`)
  const shownIds = new Set(shown.map((r) => r.runId))
  t.same(throughout.filter((id) => !shownIds.has(id)), [], 'every run that existed all along was shown (no gap)')
  t.ok(shown.every((r) => atStart.has(r.runId)), 'a run appended after the first page is on no later page')
})

t.test('the next page follows even when the run a page ended on was pruned meanwhile', async (t) => {
  const { app, call } = await service(t, ['pruned'])
  const written = await writeRuns(app.db, 'pruned', Array.from({ length: 10 }, (_, i) => at(i * 1000)))
  const first = (await call('GET', '/api/v1/polling/pruned/runs?limit=4')).body
  t.same(first.runs.map((r: any) => r.runId), written.slice(6).reverse().map((w) => w.runId))
  await sql`delete from polling_runs where run_id in (${written[6].runId}, ${written[5].runId})`.execute(app.db)
  const second = (await call('GET', `/api/v1/polling/pruned/runs?limit=4&before=${first.nextBefore}`)).body
  t.same(second.runs.map((r: any) => r.runId), [written[4], written[3], written[2], written[1]].map((w) => w.runId), 'continues with the next older run that is left')
})

t.test('before as an ISO 8601 timestamp: runs that started strictly before it', async (t) => {
  const { app, call } = await service(t, ['timed'])
  const written = await writeRuns(app.db, 'timed', ['2026-11-25T07:59:59.999999Z', '2026-11-25T08:00:00Z', '2026-11-25T08:00:00.000001Z', '2026-11-25T09:00:00Z'])
  const ids = async (before: string): Promise<string[]> => {
    const res = await call('GET', `/api/v1/polling/timed/runs?before=${encodeURIComponent(before)}`)
    t.equal(res.statusCode, 200, before)
    return res.body.runs.map((r: any) => r.runId)
  }
  t.same(await ids('2026-11-25T08:00:00Z'), [written[0].runId], 'a run at the instant itself is not before it')
  t.same(await ids('2026-11-25T09:00:00+01:00'), [written[0].runId], 'an offset names the same instant')
  t.same(await ids('2026-11-25T08:00:00.0000001Z'), [written[1].runId, written[0].runId], 'digits past the microsecond: 08:00:00.000000 is before it')
  t.same(await ids('2026-11-25T08:00:00.000001z'), [written[1].runId, written[0].runId])
  t.same(await ids('2026-11-25T10:00:00.5-01:00'), written.map((w) => w.runId).reverse())
  t.same(await ids('2026-11-25T07:00:00Z'), [], 'nothing before the first run')
  const page = (await call('GET', `/api/v1/polling/timed/runs?limit=1&before=${encodeURIComponent('2026-11-25T08:30:00Z')}`)).body
  t.equal(page.runs[0].runId, written[2].runId)
  const rest = (await call('GET', `/api/v1/polling/timed/runs?limit=5&before=${page.nextBefore}`)).body
  t.same(rest.runs.map((r: any) => r.runId), [written[1].runId, written[0].runId], 'its nextBefore pages on from there')
})

t.test('every kind of bad limit and before answers 400 saying what is allowed', async (t) => {
  const { app, call } = await service(t, ['strict', 'other'])
  await writeRuns(app.db, 'strict', [at(0), at(1000), at(2000)])
  await writeRuns(app.db, 'other', [at(0), at(1000), at(2000)])
  const cursor = (await call('GET', '/api/v1/polling/strict/runs?limit=1')).body.nextBefore as string
  const otherCursor = (await call('GET', '/api/v1/polling/other/runs?limit=1')).body.nextBefore as string
  t.equal((await call('GET', `/api/v1/polling/strict/runs?limit=1&before=${cursor}`)).statusCode, 200, 'the cursor itself is fine')

  const bytes = Buffer.from(cursor, 'base64url')
  const edited = Buffer.from(bytes)
  edited[7] ^= 1 // one bit of the position: a microsecond later
  const retagged = Buffer.concat([edited.subarray(0, 16), Buffer.alloc(12)])
  // The same bytes spelled otherwise: the last character's unused low bits set.
  const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
  const respelled = cursor.slice(0, -1) + BASE64URL[BASE64URL.indexOf(cursor[cursor.length - 1]) ^ 1]
  t.same(Buffer.from(respelled, 'base64url'), bytes, 'a respelling decodes to the same bytes')
  const limitRule = 'limit must be an integer from 1 to 500 (default 20)'
  const cases: Array<[string, string | RegExp]> = [
    ['limit=0', limitRule],
    ['limit=501', limitRule],
    ['limit=-1', limitRule],
    [`limit=${'9'.repeat(400)}`, limitRule],
    ['limit=1.5', limitRule],
    ['limit=abc', limitRule],
    ['limit=', limitRule],
    ['limit=5&limit=6', limitRule],
    ['before=', /^before must be the nextBefore of a previous page, or an ISO 8601 date-time/],
    [`before=${cursor}&before=${cursor}`, /^before must be given once/],
    [`before=${'x'.repeat(101)}`, /^before must be the nextBefore of a previous page/],
    ['before=garbage', /^before is neither a cursor nor a timestamp: pass the nextBefore of a previous page of this reaktor, or an ISO 8601 date-time with a time zone/],
    ['before=2026-11-25', /^before is neither a cursor nor a timestamp/],
    ['before=2026-11-25T08:00:00', /^before is neither a cursor nor a timestamp/],
    [`before=${edited.toString('base64url')}`, /^before is not a cursor issued for reaktor "strict": pass the nextBefore/],
    [`before=${retagged.toString('base64url')}`, /^before is not a cursor issued for reaktor "strict"/],
    [`before=${otherCursor}`, /^before is not a cursor issued for reaktor "strict"/],
    [`before=${respelled}`, /^before is not a cursor issued for reaktor "strict"/],
    [`before=${cursor.slice(0, -1)}`, /^before is neither a cursor nor a timestamp/],
    ['before=2026-02-30T00:00:00Z', 'before: 2026-02-30T00:00:00Z is no real time: day 30 does not exist in 2026-02'],
    ['before=2025-02-29T00:00:00Z', 'before: 2025-02-29T00:00:00Z is no real time: day 29 does not exist in 2025-02'],
    ['before=2026-13-01T00:00:00Z', 'before: 2026-13-01T00:00:00Z is no real time: month 13 does not exist'],
    ['before=2026-11-25T24:00:00Z', 'before: 2026-11-25T24:00:00Z is no real time: 24:00:00 is not a time of day'],
    ['before=2026-11-25T08:00:60Z', 'before: 2026-11-25T08:00:60Z is no real time: 08:00:60 is not a time of day'],
    [`before=${encodeURIComponent('2026-11-25T08:00:00+24:00')}`, 'before: 2026-11-25T08:00:00+24:00 is no real time: +24:00 is not a time zone offset']
  ]
  for (const [query, message] of cases) {
    const res = await call('GET', `/api/v1/polling/strict/runs?${query}`)
    t.equal(res.statusCode, 400, query)
    t.same(Object.keys(res.body).sort(), ['error', 'message', 'statusCode'], `${query}: the error body`)
    t.match(res.body, { statusCode: 400, error: 'Bad Request' }, query)
    if (typeof message === 'string') t.equal(res.body.message, message, query)
    else t.match(res.body.message, message, query)
  }
  t.equal((await call('GET', '/api/v1/polling/strict/runs?before=2024-02-29T00:00:00Z')).statusCode, 200, 'February 29th of a leap year is a date')
})

t.test('unknown reaktor 404, no token 401, empty history empty', async (t) => {
  const { app, call } = await service(t, ['quiet'])
  await writeRuns(app.db, 'unregistered', [at(0)])
  t.same(await call('GET', '/api/v1/polling/nope/runs'), { statusCode: 404, body: { statusCode: 404, error: 'Not Found', message: 'Polling reaktor "nope" is not registered' } })
  t.same(await call('GET', '/api/v1/polling/unregistered/runs'), { statusCode: 404, body: { statusCode: 404, error: 'Not Found', message: 'Polling reaktor "unregistered" is not registered' } },
    'runs of an id no app registers (any more) are not shown')
  for (const id of ['%00', '%ED%A0%80']) {
    const res = await call('GET', `/api/v1/polling/${id}/runs`)
    t.match(res, { statusCode: 400, body: { statusCode: 400, error: 'Bad Request' } }, `an id holding ${id}: 400, not a database error`)
  }
  const anonymous = await app.inject({ method: 'GET', url: '/api/v1/polling/quiet/runs' })
  t.equal(anonymous.statusCode, 401)
  t.same(Object.keys(anonymous.json()).sort(), ['error', 'message', 'statusCode'])
  t.same(await call('GET', '/api/v1/polling/quiet/runs'), { statusCode: 200, body: { runs: [], nextBefore: null } })
  t.same(await call('GET', '/api/v1/polling/quiet/runs?before=2026-11-25T08:00:00Z'), { statusCode: 200, body: { runs: [], nextBefore: null } })
})

t.test('any node pages the same history with cursors another node issued', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const a = await service(t, ['shared'], databaseUrl)
  const b = await service(t, ['shared'], databaseUrl)
  await writeRuns(a.app.db, 'shared', Array.from({ length: 9 }, (_, i) => at(i * 1000)))
  const first = (await a.call('GET', '/api/v1/polling/shared/runs?limit=4')).body
  const onA = (await a.call('GET', `/api/v1/polling/shared/runs?limit=4&before=${first.nextBefore}`)).body
  const onB = (await b.call('GET', `/api/v1/polling/shared/runs?limit=4&before=${first.nextBefore}`)).body
  t.equal(onA.runs.length, 4)
  t.same(onB, onA, 'the same page, and the same cursor for the next one')
})

t.test('the OpenAPI document has the operation and the run as a component', async (t) => {
  const { call } = await service(t, ['documented'])
  const doc = (await call('GET', '/api/v1/openapi.json')).body
  const op = doc.paths['/api/v1/polling/{reaktorId}/runs'].get
  t.match(op, { tags: ['polling'], summary: 'Run history of a polling reaktor, newest first' })
  t.match(op.description, /nextBefore/)
  t.same(op.parameters.filter((p: any) => p.in === 'query').map((p: any) => p.name).sort(), ['before', 'limit'])
  t.same(Object.keys(op.responses).sort(), ['200', '400', '401', '404', '500', '503'])
  const page = op.responses['200'].content['application/json'].schema
  t.equal(page.properties.runs.items.$ref, '#/components/schemas/PollingRun')
  t.same(Object.keys(doc.components.schemas.PollingRun.properties).sort(), RUN_KEYS)
  t.same(doc.components.schemas.PollingRun.properties.outcome.anyOf.map((o: any) => o.enum?.[0] ?? o.const).sort(), ['aborted', 'failed', 'more_work', 'no_work', 'timed_out'])
  t.same(doc.paths['/api/v1/polling/{reaktorId}/status'].get.responses['200'].content['application/json'].schema, { $ref: '#/components/schemas/PollingStatus' })
  const status = doc.components.schemas.PollingStatus
  for (const field of ['lastSuccessAt', 'lastFailureAt', 'lastDurationMs', 'lastOutcome', 'runningSince', 'lastError']) {
    t.type(status.properties[field]?.description, 'string', `status documents ${field}`)
  }
  // lastError outlives the failure it describes: a client must not read a non-null one as "failing now".
  t.match(status.properties.lastError.description, /kept after later successes/)
})

t.test('with history turned off (RUN_HISTORY_PER_REAKTOR=0) the answer is empty, rows of an earlier time included', async (t) => {
  const app = await build(t, { env: { ...ADMIN_ENV, RUN_HISTORY_PER_REAKTOR: '0' }, apps: [{ name: 'runs-test', version: '1.0.0', pollingReaktors: registrations('off') }] })
  const call = await loggedIn(app)
  await writeRuns(app.db, 'off', [at(0), at(1000)])
  t.same(await call('GET', '/api/v1/polling/off/runs'), { statusCode: 200, body: { runs: [], nextBefore: null } })
  t.same(await call('GET', '/api/v1/polling/off/runs?before=2026-11-26T00:00:00Z'), { statusCode: 200, body: { runs: [], nextBefore: null } })
  t.equal((await call('GET', '/api/v1/polling/off/runs?limit=0')).statusCode, 400, 'still validated')
  t.equal((await call('GET', '/api/v1/polling/nope/runs')).statusCode, 404, 'still 404 for an unknown id')
})
