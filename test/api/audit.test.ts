/**
 * The audit table and `GET /api/v1/audit`: a row for every privileged action (polling control,
 * logins, failed ones too, logouts) with who, from where and on which node; pages newest first
 * that neither lose nor repeat a row while rows are written; filters; admins only; bad queries
 * answered 400 saying what is allowed; a failed login never waits for its row, and a throttled
 * one writes none; an action whose row cannot be stored is not undone.
 */
import t from 'tap'
import pg from 'pg'
import { sql } from 'kysely'
import type { FastifyInstance } from 'fastify'
import { STATEMENT_TIMEOUT_MS } from '../../src/db/index.js'
import { ADMIN, apiLogin, loginToken, logout, sessionToken, tokenHeader } from '../helpers/auth.js'
import { auditService } from '../helpers/audit.js'
import { waitFor } from '../helpers/timing.js'

async function get (app: FastifyInstance, token: string | undefined, query: string): Promise<{ statusCode: number, body: any }> {
  const res = await app.inject({ method: 'GET', url: `/api/v1/audit${query}`, headers: tokenHeader(token) })
  return { statusCode: res.statusCode, body: res.json() }
}

async function rowCount (app: FastifyInstance, action: string): Promise<number> {
  const { rows } = await sql<{ n: string }>`select count(*) as n from audit where action = ${action}`.execute(app.db)
  return Number(rows[0].n)
}

t.test('every privileged action is a row, read back newest first with actor, address and node', async (t) => {
  const { app } = await auditService(t)
  const node = app.config.nodeId
  const login = await apiLogin(app, ADMIN, {}, '10.0.0.7')
  t.equal(login.statusCode, 200)
  const token = login.json().token as string
  const post = async (url: string, payload?: unknown): Promise<number> => (await app.inject({
    method: 'POST', url, headers: tokenHeader(token), remoteAddress: '10.0.0.8', ...(payload === undefined ? {} : { payload: payload as object })
  })).statusCode
  t.equal(await post('/api/v1/polling/a/start'), 200)
  t.equal(await post('/api/v1/polling/a/run'), 202)
  t.equal(await post('/api/v1/polling/b/run'), 409)
  t.equal(await post('/api/v1/polling/a/stop'), 200)
  t.equal(await post('/api/v1/polling/start', { ids: ['a', 'nope'] }), 200)
  t.equal(await post('/api/v1/polling/stop', { app: 'audit-app' }), 200)
  const tooLong = 'm'.repeat(70)
  t.equal((await apiLogin(app, { username: tooLong, password: 'wrong password' }, {}, '10.0.0.9')).statusCode, 401)
  t.equal((await apiLogin(app, { username: ADMIN.username, password: 'wrong password' }, {}, '10.0.0.9')).statusCode, 401)
  // A failed login's row is written after its answer: wait for both.
  await waitFor(async () => await rowCount(app, 'auth.login_failed') === 2, { what: 'the failed logins\' rows' })
  const other = await loginToken(app)
  t.equal((await logout(app, other)).statusCode, 200)

  const page = await get(app, token, '')
  t.equal(page.statusCode, 200)
  t.equal(page.body.nextBefore, null, 'one page holds them all')
  const entries = page.body.entries as Array<Record<string, any>>
  t.same(entries.map((e) => e.id), [...entries.map((e) => e.id)].sort((x, y) => y - x), 'newest first by id')
  t.ok(entries.every((e) => e.node === node && !Number.isNaN(Date.parse(e.at))), 'each with its node and time')
  const api = '/api/v1/auth/login'
  t.same(entries.map(({ action, actor, address, targets, details }) => ({ action, actor, address, targets, details })).reverse(), [
    { action: 'auth.login', actor: ADMIN.username, address: '10.0.0.7', targets: [], details: { route: api } },
    { action: 'polling.start', actor: ADMIN.username, address: '10.0.0.8', targets: ['a'], details: { changed: true } },
    { action: 'polling.run', actor: ADMIN.username, address: '10.0.0.8', targets: ['a'], details: { requested: true } },
    { action: 'polling.run', actor: ADMIN.username, address: '10.0.0.8', targets: ['b'], details: { requested: false } },
    { action: 'polling.stop', actor: ADMIN.username, address: '10.0.0.8', targets: ['a'], details: { changed: true } },
    { action: 'polling.bulk_start', actor: ADMIN.username, address: '10.0.0.8', targets: ['a'], details: { changed: ['a'], unchanged: [], notFound: ['nope'] } },
    { action: 'polling.bulk_stop', actor: ADMIN.username, address: '10.0.0.8', targets: ['a', 'b'], details: { app: 'audit-app', changed: ['a'], unchanged: ['b'], notFound: [] } },
    // The two failures were written concurrently with their answers: their order is whichever committed first.
    ...entries.filter((e) => e.action === 'auth.login_failed').reverse().map(({ actor }) => ({ action: 'auth.login_failed', actor, address: '10.0.0.9', targets: [], details: { route: api } })),
    { action: 'auth.login', actor: ADMIN.username, address: '127.0.0.1', targets: [], details: { route: api } },
    { action: 'auth.logout', actor: ADMIN.username, address: '127.0.0.1', targets: [], details: {} }
  ])
  t.same(entries.filter((e) => e.action === 'auth.login_failed').map((e) => e.actor).sort(), [ADMIN.username, 'm'.repeat(64)].sort(),
    'a failed login names the username tried, cut to 64 characters')
  t.notOk(JSON.stringify(entries).includes('wrong password'), 'never the password')
})

t.test('pages newest first across pages: no row lost or repeated while rows are written', async (t) => {
  const { app } = await auditService(t)
  const token = await loginToken(app)
  await sql`insert into audit (action, actor, node, targets) select 'polling.start', 'script', 'n', array['r' || i] from generate_series(1, 130) as i`.execute(app.db)
  const { rows: [{ max }] } = await sql<{ max: string }>`select max(id) as max from audit`.execute(app.db)
  const seen: number[] = []
  let before: string | null = null
  let pages = 0
  do {
    const page = await get(app, token, `?limit=50${before === null ? '' : `&before=${encodeURIComponent(before)}`}`)
    t.equal(page.statusCode, 200)
    seen.push(...(page.body.entries as Array<{ id: number }>).map((e) => e.id))
    before = page.body.nextBefore
    pages++
    // New rows meanwhile: above the first page, never in a later one.
    await sql`insert into audit (action, actor, node) values ('polling.stop', 'script', 'n')`.execute(app.db)
  } while (before !== null && pages < 10)
  t.equal(pages, 3, '131 rows (the login too) in pages of 50: 3 pages')
  const expected = (await app.db.selectFrom('audit').select('id').where('id', '<=', max).orderBy('id', 'desc').execute()).map((r) => Number(r.id))
  t.equal(expected.length, 131)
  t.same(seen, expected, 'every row up to the first page\'s newest, once, newest first')

  const small = await get(app, token, '?limit=1')
  t.equal(small.body.entries.length, 1)
  t.type(small.body.nextBefore, 'string')
  t.equal((await get(app, token, '')).body.entries.length, 50, 'limit 50 by default')
})

t.test('filters: action exactly, actor without regard to case; paging keeps the filter', async (t) => {
  const { app } = await auditService(t)
  const token = await loginToken(app)
  await sql`
    insert into audit (action, actor, node)
    select case when i % 3 = 0 then 'polling.run' else 'polling.start' end, case when i % 2 = 0 then 'Bob' else 'carol' end, 'n'
    from generate_series(1, 60) as i
  `.execute(app.db)
  const all = async (query: string): Promise<Array<Record<string, any>>> => {
    const out: Array<Record<string, any>> = []
    let before: string | null = null
    do {
      const page = await get(app, token, `${query}&limit=7${before === null ? '' : `&before=${encodeURIComponent(before)}`}`)
      t.equal(page.statusCode, 200)
      out.push(...page.body.entries)
      before = page.body.nextBefore
    } while (before !== null)
    return out
  }
  const runs = await all('?action=polling.run')
  t.equal(runs.length, 20)
  t.ok(runs.every((e) => e.action === 'polling.run'))
  const bob = await all('?actor=BOB')
  t.equal(bob.length, 30)
  t.ok(bob.every((e) => e.actor === 'Bob'))
  const both = await all('?actor=bob&action=polling.run')
  t.equal(both.length, 10, 'i divisible by 6')
  t.same((await get(app, token, '?action=polling')).body, { entries: [], nextBefore: null }, 'exact: no prefix match')
})

t.test('admins only: an operator is refused 403, no token 401', async (t) => {
  const { app } = await auditService(t)
  const operator = await sessionToken(app)
  const refused = await get(app, operator, '')
  t.equal(refused.statusCode, 403)
  t.same(refused.body, { statusCode: 403, error: 'Forbidden', message: 'This needs the admin role' })
  const anonymous = await get(app, undefined, '')
  t.equal(anonymous.statusCode, 401)
  t.same(Object.keys(anonymous.body).sort(), ['error', 'message', 'statusCode'])
})

t.test('a bad limit or before is 400 saying what is allowed', async (t) => {
  const { app } = await auditService(t)
  const token = await loginToken(app)
  const { body: { nextBefore } } = await get(app, token, '?limit=1')
  await sql`insert into audit (action, node) values ('polling.run', 'n')`.execute(app.db)
  const cursor = (await get(app, token, '?limit=1')).body.nextBefore as string
  t.type(cursor, 'string')
  t.equal(nextBefore, null, 'one row (the login): no older page')
  // Another id under the same tag; and the same bytes spelled with the last character's unused bits set.
  const tampered = cursor.slice(0, 8) + (cursor[8] === 'A' ? 'B' : 'A') + cursor.slice(9)
  const last = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'.indexOf(cursor[cursor.length - 1])
  const respelled = cursor.slice(0, -1) + 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'[last ^ 1]
  const cases: Array<[string, RegExp]> = [
    ['?limit=0', /limit must be an integer from 1 to 500 \(default 50\)/],
    ['?limit=501', /limit must be an integer from 1 to 500/],
    ['?limit=abc', /limit must be an integer from 1 to 500/],
    ['?limit=1e2', /limit must be an integer from 1 to 500/],
    ['?limit=0x10', /limit must be an integer from 1 to 500/],
    ['?limit=-1', /limit must be an integer from 1 to 500/],
    [`?limit=${'9'.repeat(400)}`, /limit must be an integer from 1 to 500/],
    ['?limit=5&limit=6', /limit must be an integer from 1 to 500/],
    ['?before=', /before must be the nextBefore of a previous page/],
    ['?before=yesterday', /before must be the nextBefore of a previous page \(an opaque cursor\)/],
    [`?before=${tampered}`, /before must be the nextBefore of a previous page \(an opaque cursor\)/],
    [`?before=${respelled}`, /before must be the nextBefore of a previous page \(an opaque cursor\)/],
    [`?before=${cursor}&before=${cursor}`, /before must be the nextBefore of a previous page, given once/],
    ['?before=%00', /before must be the nextBefore/],
    // A cursor of the run history is not one of the audit log.
    ['?before=AAZhGcfj9RAAAAAAAAAAGHqZQMwJ7y4Y_2aIIA', /before must be the nextBefore of a previous page \(an opaque cursor\)/],
    ['?action=%00', /^action must be 1 to 100 characters, without NUL or unpaired surrogate characters, given once$/],
    ['?action=', /^action must be 1 to 100 characters/],
    ['?action=polling.run&action=polling.stop', /^action must be .*, given once$/],
    ['?actor=alice&actor=bob', /^actor must be 1 to 200 characters, .*, given once$/],
    [`?actor=${'a'.repeat(201)}`, /^actor must be 1 to 200 characters/]
  ]
  for (const [query, message] of cases) {
    const res = await get(app, token, query)
    t.equal(res.statusCode, 400, query)
    t.same(Object.keys(res.body).sort(), ['error', 'message', 'statusCode'], `${query}: the error body`)
    t.match(res.body.message, message, `${query}: ${res.body.message as string}`)
  }
  t.equal((await get(app, token, `?before=${cursor}`)).statusCode, 200, 'the untampered cursor pages')
})

t.test('a failed login answers without waiting for its row; a throttled one (429) writes none', async (t) => {
  const { app, databaseUrl } = await auditService(t, { LOGIN_RATE_LIMIT: '2' })
  // Another session holds the audit table: any insert waits until it lets go.
  const blocker = new pg.Client({ connectionString: databaseUrl })
  await blocker.connect()
  t.teardown(async () => await blocker.end())
  await blocker.query('begin')
  await blocker.query('lock table audit in access exclusive mode')
  const started = Date.now()
  const res = await apiLogin(app, { username: ADMIN.username, password: 'wrong password' }, {}, '10.1.1.1')
  const elapsed = Date.now() - started
  t.equal(res.statusCode, 401)
  // Waiting for the insert would answer no earlier than the statement timeout cancels it.
  t.ok(elapsed < STATEMENT_TIMEOUT_MS, `answered in ${elapsed} ms while the audit table was locked`)
  const { rows: [{ n }] } = await blocker.query("select count(*)::int as n from audit where action = 'auth.login_failed'")
  t.equal(n, 0, 'its row not yet written (read through the session holding the lock)')
  await blocker.query('rollback')
  await waitFor(async () => await rowCount(app, 'auth.login_failed') === 1, { what: 'the row, once the table is free' })

  t.equal((await apiLogin(app, { username: ADMIN.username, password: 'wrong again' }, {}, '10.1.1.1')).statusCode, 401)
  await waitFor(async () => await rowCount(app, 'auth.login_failed') === 2, { what: 'the second row' })
  for (let i = 0; i < 5; i++) {
    t.equal((await apiLogin(app, { username: ADMIN.username, password: 'wrong' }, {}, '10.1.1.1')).statusCode, 429)
  }
  // A failed login's row is written after its answer; closing the app awaits every such write,
  // so what the table holds then is all the 429s could have written.
  await loginToken(app)
  await app.close()
  const { rows: after } = await blocker.query<{ action: string, n: number }>('select action, count(*)::int as n from audit group by action order by action')
  t.same(after, [{ action: 'auth.login', n: 1 }, { action: 'auth.login_failed', n: 2 }], 'the 429s wrote no row')
})

t.test('a polling action whose row cannot be stored is not undone: its one audit line is an error with the entry', async (t) => {
  const { app, lines } = await auditService(t)
  const token = await loginToken(app)
  await sql`alter table audit rename to audit_away`.execute(app.db)
  const res = await app.inject({ method: 'POST', url: '/api/v1/polling/a/start', headers: tokenHeader(token) })
  await sql`alter table audit_away rename to audit`.execute(app.db)
  t.equal(res.statusCode, 200, 'the start is answered as done')
  const status = await app.inject({ method: 'GET', url: '/api/v1/polling/a/status', headers: tokenHeader(token) })
  t.equal(status.json().state, 'running', 'and it is done')
  const audits = lines.map((l) => JSON.parse(l)).filter((l) => l.audit?.action === 'polling.start')
  t.equal(audits.length, 1, 'one line')
  t.equal(audits[0].level, 50, 'an error')
  t.match(audits[0].msg, /not stored in the audit table/)
  t.same(audits[0].audit, { action: 'polling.start', targets: ['a'], user: ADMIN.username, address: '127.0.0.1', node: app.config.nodeId, details: { changed: true } })
  t.match(audits[0].err.message, /audit/)
  t.equal(await rowCount(app, 'polling.start'), 0)
})
