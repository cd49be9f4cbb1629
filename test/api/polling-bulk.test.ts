/**
 * Bulk start and stop (`POST /api/v1/polling/start|stop`): selection by ids or by app, per-reaktor
 * results, unknown ids written nowhere, every 400, one transaction (a real failure midway leaves
 * every reaktor as it was), and the audit lines of every start and stop.
 */
import pg from 'pg'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { NOTIFY_CHANNEL } from '../../src/scheduler/index.js'
import { MAX_REAKTOR_ID_LENGTH } from '../../src/apps/registry.js'
import type { AppDefinition } from '../../src/apps/types.js'
import { buildLogged } from '../helpers/app.js'
import { ADMIN, ADMIN_ENV, loginToken, tokenHeader } from '../helpers/auth.js'
import type { TestContext } from '../helpers/test-context.js'
import { waitFor } from '../helpers/timing.js'
import { probe } from '../helpers/scheduler.js'

interface Service {
  app: FastifyInstance
  databaseUrl: string
  /** A JSON request with the session token; `payload` as given (a string is sent as it is). */
  call: (method: 'GET' | 'POST', url: string, payload?: unknown, headers?: Record<string, string>) => Promise<{ statusCode: number, body: any }>
  /** The audit objects logged so far, in order. */
  audits: () => Array<Record<string, any>>
  states: () => Promise<Record<string, string>>
  rowIds: () => Promise<string[]>
}

/** The probes never finish a run before an hour: a reaktor's runs are 1 at start, then one an hour. */
function reaktors (ids: string[], autoStart = false): AppDefinition['pollingReaktors'] {
  return ids.map((id) => probe(id, () => false, { interval: '1h', autoStart }).registration)
}

async function service (t: TestContext, apps: AppDefinition[]): Promise<Service> {
  const { app, databaseUrl, audits } = await buildLogged(t, ADMIN_ENV, apps)
  const token = await loginToken(app)
  const call: Service['call'] = async (method, url, payload, headers = {}) => {
    const res = await app.inject({
      method,
      url,
      headers: { ...tokenHeader(token), ...(payload === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      payload: typeof payload === 'string' || payload === undefined ? payload : JSON.stringify(payload)
    })
    return { statusCode: res.statusCode, body: res.json() }
  }
  const states = async (): Promise<Record<string, string>> => {
    const res = await call('GET', '/api/v1/polling')
    return Object.fromEntries((res.body.pollingReaktors as Array<{ reaktorDefinitionId: string, state: string }>).map((s) => [s.reaktorDefinitionId, s.state]))
  }
  const rowIds = async (): Promise<string[]> =>
    (await app.db.selectFrom('polling_reaktors').select('reaktor_id').orderBy('reaktor_id').execute()).map((r) => r.reaktor_id)
  return { app, databaseUrl, call, audits, states, rowIds }
}

t.test('by ids: results in request order, unknown ids named and written nowhere, repeats change nothing', async (t) => {
  const s = await service(t, [{ name: 'bulk-app', version: '1.0.0', pollingReaktors: reaktors(['a', 'b', 'c']) }])
  t.same(await s.rowIds(), ['a', 'b', 'c'])

  let res = await s.call('POST', '/api/v1/polling/start', { ids: ['c', 'nope', 'a'] })
  t.same(res, {
    statusCode: 200,
    body: {
      action: 'start',
      results: [{ reaktorDefinitionId: 'c', result: 'started' }, { reaktorDefinitionId: 'nope', result: 'not_found' }, { reaktorDefinitionId: 'a', result: 'started' }],
      changed: 2,
      unchanged: 0,
      notFound: ['nope']
    }
  })
  t.same(await s.states(), { a: 'running', b: 'stopped', c: 'running' }, 'the known ones started, b untouched')
  t.same(await s.rowIds(), ['a', 'b', 'c'], 'no row for the unknown id')
  t.same((await s.call('GET', '/api/v1/polling/nope/status')).statusCode, 404, 'the unknown id is still unknown')

  res = await s.call('POST', '/api/v1/polling/start', { ids: ['a', 'c'] })
  t.same(res.body, { action: 'start', results: [{ reaktorDefinitionId: 'a', result: 'already_running' }, { reaktorDefinitionId: 'c', result: 'already_running' }], changed: 0, unchanged: 2, notFound: [] }, 'a repeat: 200, nothing changed')

  res = await s.call('POST', '/api/v1/polling/stop', { ids: ['b', 'a', 'c', 'gone'] })
  t.same(res.body, {
    action: 'stop',
    results: [{ reaktorDefinitionId: 'b', result: 'already_stopped' }, { reaktorDefinitionId: 'a', result: 'stopped' }, { reaktorDefinitionId: 'c', result: 'stopped' }, { reaktorDefinitionId: 'gone', result: 'not_found' }],
    changed: 2,
    unchanged: 1,
    notFound: ['gone']
  })
  t.same(await s.states(), { a: 'stopped', b: 'stopped', c: 'stopped' })
  res = await s.call('POST', '/api/v1/polling/stop', { ids: ['a', 'b', 'c'] })
  t.same([res.body.changed, res.body.unchanged], [0, 3], 'a repeated stop: 200, nothing changed')
  t.same(await s.rowIds(), ['a', 'b', 'c'], 'still no row for the unknown ids')

  res = await s.call('POST', '/api/v1/polling/start', { ids: ['only-unknown'] })
  t.same(res, { statusCode: 200, body: { action: 'start', results: [{ reaktorDefinitionId: 'only-unknown', result: 'not_found' }], changed: 0, unchanged: 0, notFound: ['only-unknown'] } })
})

t.test('a bulk start runs the reaktors at once, a bulk stop aborts their runs in flight', async (t) => {
  const runs = ['r1', 'r2'].map((id) => probe(id, async (_n, ctx) => await new Promise<boolean>((resolve) => ctx.signal.addEventListener('abort', () => resolve(true), { once: true })), { interval: '1h' }))
  const s = await service(t, [{ name: 'bulk-app', version: '1.0.0', pollingReaktors: runs.map((p) => p.registration) }])
  t.equal((await s.call('POST', '/api/v1/polling/start', { ids: ['r1', 'r2'] })).body.changed, 2)
  await waitFor(() => runs.every((p) => p.runs.length === 1), { what: 'a run of each' })
  t.equal((await s.call('POST', '/api/v1/polling/stop', { app: 'bulk-app' })).body.changed, 2)
  await waitFor(() => runs.every((p) => p.runs[0].end !== undefined), { what: 'both runs to end' })
  for (const p of runs) t.match(String(p.runs[0].aborted), /stopped/, `${p.registration.reaktorDefinitionId}: its run was aborted by the stop`)
  t.equal(runs[0].runs.length + runs[1].runs.length, 2, 'no run after the stop')
})

t.test('by app: all its polling reaktors, sorted by id; an unknown app is 404, an app without polling reaktors 400', async (t) => {
  const s = await service(t, [
    { name: 'alpha', version: '1.0.0', pollingReaktors: reaktors(['z-last', 'a-first']) },
    { name: 'alpha', version: '2.0.0', pollingReaktors: reaktors(['m-middle']) },
    { name: 'beta', version: '1.0.0', pollingReaktors: reaktors(['beta-1']) },
    { name: 'ui-only', version: '1.0.0' }
  ])
  let res = await s.call('POST', '/api/v1/polling/start', { app: 'alpha' })
  t.same(res.body.results, [{ reaktorDefinitionId: 'a-first', result: 'started' }, { reaktorDefinitionId: 'm-middle', result: 'started' }, { reaktorDefinitionId: 'z-last', result: 'started' }],
    'every loaded version of the app, sorted by id')
  t.same(await s.states(), { 'a-first': 'running', 'beta-1': 'stopped', 'm-middle': 'running', 'z-last': 'running' })
  res = await s.call('POST', '/api/v1/polling/start', { app: 'alpha' })
  t.same([res.body.changed, res.body.unchanged], [0, 3], 'a repeat changes nothing')

  res = await s.call('POST', '/api/v1/polling/stop', { app: 'ghost' })
  t.same(res, { statusCode: 404, body: { statusCode: 404, error: 'Not Found', message: 'App "ghost" is not loaded' } })
  res = await s.call('POST', '/api/v1/polling/stop', { app: 'ui-only' })
  t.same(res, { statusCode: 400, body: { statusCode: 400, error: 'Bad Request', message: 'App "ui-only" has no polling reaktors' } })
  res = await s.call('POST', '/api/v1/polling/stop', { app: 'alpha@1.0.0' })
  t.equal(res.statusCode, 404, 'the app name, not name@version')
  t.same(await s.states(), { 'a-first': 'running', 'beta-1': 'stopped', 'm-middle': 'running', 'z-last': 'running' }, 'the refused requests changed nothing')

  res = await s.call('POST', '/api/v1/polling/stop', { app: 'alpha' })
  t.same([res.body.action, res.body.changed, res.body.notFound], ['stop', 3, []])
  t.same(await s.states(), { 'a-first': 'stopped', 'beta-1': 'stopped', 'm-middle': 'stopped', 'z-last': 'stopped' })
})

t.test('every malformed selection is 400 with the error body and changes nothing; 10,000 ids of the longest registrable length are accepted', async (t) => {
  const s = await service(t, [{ name: 'bulk-app', version: '1.0.0', pollingReaktors: reaktors(['a', 'b']) }])
  const tooMany = Array.from({ length: 10_001 }, (_, i) => `id-${i}`)
  const cases: Array<[string, unknown, RegExp]> = [
    ['empty ids', { ids: [] }, /must NOT have fewer than 1 items/],
    ['10,001 ids', { ids: tooMany }, /must NOT have more than 10000 items/],
    ['a duplicate id', { ids: ['a', 'b', 'a'] }, /must NOT have duplicate items/],
    ['an empty id', { ids: ['a', ''] }, /body\/ids\/1 must NOT have fewer than 1 characters/],
    ['an id with NUL', { ids: ['a', 'b\u0000'] }, /body\/ids\/1 must match pattern/],
    ['an id with a lone surrogate', { ids: ['\ud800'] }, /body\/ids\/0 must match pattern/],
    ['an id longer than a path can carry', { ids: ['x'.repeat(1025)] }, /must NOT have more than 1024 characters/],
    ['an id that is no string', { ids: ['a', 5] }, /body\/ids\/1 must be string/],
    ['ids that are no array', { ids: 'a' }, /body\/ids must be array/],
    ['both ids and app', { ids: ['a'], app: 'bulk-app' }, /exactly one of "ids" or "app"/],
    ['neither', {}, /exactly one of "ids" or "app"/],
    ['an extra property', { ids: ['a'], force: true }, /must NOT have additional properties/],
    ['an extra property beside app', { app: 'bulk-app', dryRun: false }, /must NOT have additional properties/],
    ['an empty app', { app: '' }, /body\/app must NOT have fewer than 1 characters/],
    ['an app with NUL', { app: 'bulk\u0000app' }, /body\/app must match pattern/],
    ['an app that is no string', { app: ['bulk-app'] }, /body\/app must be string/],
    ['an array body', ['a', 'b'], /must be an object/],
    ['a string body', '"a"', /must be an object/],
    ['a null body', 'null', /must be an object/]
  ]
  for (const action of ['start', 'stop']) {
    for (const [what, payload, message] of cases) {
      const res = await s.call('POST', `/api/v1/polling/${action}`, payload)
      t.equal(res.statusCode, 400, `${action}, ${what}: 400`)
      t.same(Object.keys(res.body).sort(), ['error', 'message', 'statusCode'], `${action}, ${what}: the error body`)
      t.match(res.body, { statusCode: 400, error: 'Bad Request', message }, `${action}, ${what}: ${String(res.body.message).slice(0, 120)}`)
    }
    const empty = await s.call('POST', `/api/v1/polling/${action}`)
    t.match(empty, { statusCode: 400, body: { statusCode: 400, error: 'Bad Request', message: /must be an object/ } }, `${action} without a body: 400`)
  }
  t.same(await s.states(), { a: 'stopped', b: 'stopped' }, 'nothing changed')
  t.same(await s.rowIds(), ['a', 'b'], 'no row was created')

  // The boundary: 10,000 ids, each as long as a registered id may be in characters of 3 bytes, is a valid request.
  const long = Array.from({ length: 9_999 }, (_, i) => `${i}-`.padEnd(MAX_REAKTOR_ID_LENGTH, '€'))
  const res = await s.call('POST', '/api/v1/polling/start', { ids: ['a', ...long] })
  t.equal(res.statusCode, 200, `10,000 ids (${Buffer.byteLength(JSON.stringify({ ids: ['a', ...long] }))} bytes of JSON): 200`)
  t.same([res.body.changed, res.body.notFound.length, res.body.results.length], [1, 9_999, 10_000])
  t.same(await s.rowIds(), ['a', 'b'], 'no row for any of the 9,999 unknown ids')
})

t.test('401 without a token, before the body is read; the bulk routes do not capture a reaktor named "start"', async (t) => {
  const s = await service(t, [{ name: 'bulk-app', version: '1.0.0', pollingReaktors: reaktors(['start', 'stop', 'a']) }])
  for (const action of ['start', 'stop']) {
    for (const payload of [{ ids: ['a'] }, { app: 'bulk-app' }]) {
      const res = await s.app.inject({ method: 'POST', url: `/api/v1/polling/${action}`, payload })
      t.equal(res.statusCode, 401, `${action} ${JSON.stringify(payload)} without a token`)
      t.same(Object.keys(res.json()).sort(), ['error', 'message', 'statusCode'])
    }
    // Larger than any bulk body may be: refused as unauthenticated, not read.
    const huge = await s.app.inject({ method: 'POST', url: `/api/v1/polling/${action}`, headers: { 'content-type': 'application/json' }, payload: `{"ids":["${'x'.repeat(20 * 1024 * 1024)}"]}` })
    t.equal(huge.statusCode, 401, `${action}: a 20 MB body without a token is 401`)
  }
  t.same(await s.states(), { a: 'stopped', start: 'stopped', stop: 'stopped' }, 'nothing changed without a token')

  t.same(await s.call('POST', '/api/v1/polling/start/start'), { statusCode: 200, body: { message: 'Polling reaktor "start" started successfully' } }, 'the single route of the reaktor "start"')
  t.same(await s.call('POST', '/api/v1/polling/stop/start'), { statusCode: 200, body: { message: 'Polling reaktor "stop" started successfully' } })
  t.same(await s.call('POST', '/api/v1/polling/start/stop'), { statusCode: 200, body: { message: 'Polling reaktor "start" stopped successfully' } })
  const res = await s.call('POST', '/api/v1/polling/stop', { ids: ['stop', 'start'] })
  t.same(res.body.results, [{ reaktorDefinitionId: 'stop', result: 'stopped' }, { reaktorDefinitionId: 'start', result: 'already_stopped' }], 'POST /polling/stop is the bulk stop')
  t.same(await s.states(), { a: 'stopped', start: 'stopped', stop: 'stopped' })
})

/** Waits for a NOTIFY on the state channel that the test sends itself: every earlier committed one arrived before it. */
async function notificationsUntilMarker (client: pg.Client, received: string[], marker: string): Promise<string[]> {
  await client.query('select pg_notify($1, $2)', [NOTIFY_CHANNEL, marker])
  await waitFor(() => received.includes(marker), { what: 'the marker notification' })
  return received.slice(0, received.indexOf(marker))
}

t.test('one transaction: a write refused midway (by a trigger) leaves every reaktor as it was, announces nothing, answers 500 without internals', async (t) => {
  const ids = ['a', 'b', 'poison', 'z']
  const s = await service(t, [{ name: 'bulk-app', version: '1.0.0', pollingReaktors: reaktors(ids, true) }])
  await waitFor(() => ids.every((id) => s.app.scheduler.ownedReaktorIds().includes(id)), { what: 'the node to own every reaktor' })
  const admin = new pg.Client({ connectionString: s.databaseUrl })
  await admin.connect()
  t.teardown(async () => await admin.end())
  // The database itself refuses the write of one row, after the rows before it (by id) were written.
  await admin.query(`
    create function refuse_poison() returns trigger language plpgsql as $$
    begin raise exception 'refusing to change poison'; end $$;
    create trigger refuse_poison before update or insert on polling_reaktors
      for each row when (new.reaktor_id = 'poison') execute function refuse_poison();`)
  const received: string[] = []
  admin.on('notification', (n) => { if (n.channel === NOTIFY_CHANNEL) received.push(String(n.payload)) })
  await admin.query(`listen ${NOTIFY_CHANNEL}`)

  const versions = async (): Promise<Record<string, string>> => Object.fromEntries((await s.app.db.selectFrom('polling_reaktors')
    .select(['reaktor_id', 'state', 'state_version']).execute()).map((r) => [r.reaktor_id, `${r.state}@${String(r.state_version)}`]))
  const before = await versions()
  t.same(Object.values(before).map((v) => v.split('@')[0]), ['running', 'running', 'running', 'running'])

  let res = await s.call('POST', '/api/v1/polling/stop', { ids })
  t.same(res, { statusCode: 500, body: { statusCode: 500, error: 'Internal Server Error', message: 'Internal Server Error' } }, 'a 500 naming nothing internal')
  t.same(await versions(), before, 'every row as it was: a and b were not stopped either')
  t.same(await notificationsUntilMarker(admin, received, 'marker-1'), [], 'no state change was announced')
  t.same(s.app.scheduler.ownedReaktorIds().sort(), ids, 'this node still runs every one of them')
  t.same(await s.states(), { a: 'running', b: 'running', poison: 'running', z: 'running' })

  // The same for a start: all four stopped (one by one, the trigger set aside), then started at once.
  await admin.query('alter table polling_reaktors disable trigger refuse_poison')
  for (const id of ids) t.equal((await s.call('POST', `/api/v1/polling/${id}/stop`)).statusCode, 200)
  await admin.query('alter table polling_reaktors enable trigger refuse_poison')
  await notificationsUntilMarker(admin, received, 'marker-2')
  const stopped = await versions()
  received.length = 0
  res = await s.call('POST', '/api/v1/polling/start', { ids })
  t.equal(res.statusCode, 500)
  t.same(await versions(), stopped, 'no reaktor was started')
  t.same(await notificationsUntilMarker(admin, received, 'marker-3'), [], 'no start was announced')

  await admin.query('drop trigger refuse_poison on polling_reaktors; drop function refuse_poison()')
  res = await s.call('POST', '/api/v1/polling/start', { ids })
  t.same([res.statusCode, res.body.changed], [200, 4], 'with the trigger gone, the same request starts all four')
  t.same((await notificationsUntilMarker(admin, received, 'marker-4')).filter((n) => !n.startsWith('marker')).sort(), ids, 'each announced once, on commit')
})

t.test('a bulk transaction that PostgreSQL aborts as a deadlock victim is run again: the request succeeds', async (t) => {
  const s = await service(t, [{ name: 'bulk-app', version: '1.0.0', pollingReaktors: reaktors(['a', 'b'], true) }])
  t.same(await s.states(), { a: 'running', b: 'running' })
  const other = new pg.Client({ connectionString: s.databaseUrl })
  await other.connect()
  t.teardown(async () => await other.end())
  // This session waits long before it looks for a deadlock: the bulk transaction (1 s) finds it first and gives way.
  await other.query("set deadlock_timeout = '20s'")
  await other.query('begin')
  await other.query("select 1 from polling_reaktors where reaktor_id = 'b' for update")
  const request = s.call('POST', '/api/v1/polling/stop', { ids: ['b', 'a'] })
  // The bulk transaction locks in id order: it holds a and waits for b.
  await waitFor(async () => (await other.query('select 1 from pg_locks where not granted and pid <> pg_backend_pid()')).rowCount! > 0, { what: 'the bulk transaction to wait for b' })
  const sent = Date.now()
  // Now this session waits for a: a deadlock, and PostgreSQL aborts the bulk transaction, which releases a.
  await other.query("select 1 from polling_reaktors where reaktor_id = 'a' for update")
  t.pass(`the bulk transaction gave way after ${Date.now() - sent} ms`)
  await other.query('commit')
  const res = await request
  t.same([res.statusCode, res.body.changed], [200, 2], 'the retried bulk stop answered 200 and stopped both')
  t.same(await s.states(), { a: 'stopped', b: 'stopped' })
  const { rows } = await other.query<{ deadlocks: string }>('select deadlocks from pg_stat_database where datname = current_database()')
  t.comment(`deadlocks in this database: ${rows[0].deadlocks}`)
})

t.test('audit lines: single start and stop, bulk by ids and by app, each with user, node and what changed', async (t) => {
  const s = await service(t, [
    { name: 'bulk-app', version: '1.0.0', pollingReaktors: reaktors(['a', 'b', 'c']) },
    { name: 'other', version: '1.0.0', pollingReaktors: reaktors(['o']) }
  ])
  await s.call('POST', '/api/v1/polling/a/start')
  await s.call('POST', '/api/v1/polling/a/start')
  await s.call('POST', '/api/v1/polling/a/stop')
  await s.call('POST', '/api/v1/polling/a/stop')
  await s.call('POST', '/api/v1/polling/nope/stop')
  await s.call('POST', '/api/v1/polling/start', { ids: ['b', 'nope', 'c'] })
  await s.call('POST', '/api/v1/polling/start', { ids: ['c'] })
  await s.call('POST', '/api/v1/polling/stop', { app: 'bulk-app' })
  await s.call('POST', '/api/v1/polling/stop', { ids: [] })
  await s.call('POST', '/api/v1/polling/stop', { app: 'ghost' })
  await s.app.inject({ method: 'POST', url: '/api/v1/polling/o/start' })
  const node = s.app.config.nodeId
  const user = ADMIN.username
  t.same(s.audits(), [
    { action: 'auth.login', targets: [], user, address: '127.0.0.1', node, details: { route: '/api/v1/auth/login' } },
    { action: 'polling.start', targets: ['a'], user, address: '127.0.0.1', node, details: { changed: true } },
    { action: 'polling.start', targets: ['a'], user, address: '127.0.0.1', node, details: { changed: false } },
    { action: 'polling.stop', targets: ['a'], user, address: '127.0.0.1', node, details: { changed: true } },
    { action: 'polling.stop', targets: ['a'], user, address: '127.0.0.1', node, details: { changed: false } },
    { action: 'polling.bulk_start', targets: ['b', 'c'], user, address: '127.0.0.1', node, details: { changed: ['b', 'c'], unchanged: [], notFound: ['nope'] } },
    { action: 'polling.bulk_start', targets: ['c'], user, address: '127.0.0.1', node, details: { changed: [], unchanged: ['c'], notFound: [] } },
    { action: 'polling.bulk_stop', targets: ['a', 'b', 'c'], user, address: '127.0.0.1', node, details: { app: 'bulk-app', changed: ['b', 'c'], unchanged: ['a'], notFound: [] } }
  ], 'one line per accepted action (the login of the test client first); refused requests (404, 400, 401) write none')
  t.equal(s.audits().length, 8)
})

t.test('the OpenAPI document describes both operations: body, answer and every error', async (t) => {
  const s = await service(t, [{ name: 'bulk-app', version: '1.0.0', pollingReaktors: reaktors(['a']) }])
  const doc = (await s.call('GET', '/api/v1/openapi.json')).body
  for (const action of ['start', 'stop']) {
    const op = doc.paths[`/api/v1/polling/${action}`].post
    t.same(op.tags, ['polling'], `${action}: tagged`)
    t.match(op.summary, /many polling reaktors/)
    const body = op.requestBody.content['application/json'].schema
    t.same(body.anyOf.map((b: { required: string[], additionalProperties: boolean }) => [b.required, b.additionalProperties]), [[['ids'], false], [['app'], false]], `${action}: the body is ids or app, nothing else`)
    t.match(body.anyOf[0].properties.ids, { type: 'array', minItems: 1, maxItems: 10_000, uniqueItems: true, items: { type: 'string', minLength: 1, maxLength: 1024 } })
    const ok = op.responses['200'].content['application/json'].schema
    t.same(Object.keys(ok.properties).sort(), ['action', 'changed', 'notFound', 'results', 'unchanged'], `${action}: the answer`)
    for (const code of ['400', '401', '404', '413', '500']) {
      t.same(op.responses[code].content['application/json'].schema, { $ref: '#/components/schemas/ErrorBody' }, `${action}: ${code} is the error body`)
    }
  }
})
