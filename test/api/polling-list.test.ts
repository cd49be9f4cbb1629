/** `GET /api/v1/polling` with query parameters: one page, filtered and sorted, with its total and the counts of all. */
import t, { type Test } from 'tap'
import { sql } from 'kysely'
import type { FastifyInstance } from 'fastify'
import { ADMIN_ENV, loggedIn, type ApiCall } from '../helpers/auth.js'
import { build } from '../helpers/app.js'
import { FAST_SCHEDULER, probe } from '../helpers/scheduler.js'

/**
 * Two apps, five reaktors: `mail-digest` (mailer, label "Digest of MAIL") and `mail-retry` (mailer)
 * running; `report-sync` (reports, label "Sync reports"), `report-archive` (reports, failing twice)
 * and `zz-cleanup` (reports, failing once) stopped. Intervals of an hour: nothing runs again meanwhile.
 */
async function service (t: Test): Promise<{ app: FastifyInstance, call: ApiCall, ids: (query: string) => Promise<string[]> }> {
  const app = await build(t, {
    env: ADMIN_ENV,
    apps: [
      { name: 'mailer', version: '1.0.0', pollingReaktors: [probe('mail-digest', () => false, { interval: '2h', label: 'Digest of MAIL' }).registration, probe('mail-retry', () => false, { interval: '90m' }).registration] },
      { name: 'reports', version: '1.0.0', pollingReaktors: [probe('report-sync', () => false, { interval: '1h', label: 'Sync reports' }).registration, probe('report-archive', () => false, { interval: '3h' }).registration, probe('zz-cleanup', () => false, { interval: '1d' }).registration] }
    ],
    scheduler: FAST_SCHEDULER
  })
  const call = await loggedIn(app)
  for (const id of ['mail-digest', 'mail-retry']) t.equal((await call('POST', `/api/v1/polling/${id}/start`)).statusCode, 200, `start ${id}`)
  await sql`update polling_reaktors set consecutive_failures = 2, last_error = 'boom' where reaktor_id = 'report-archive'`.execute(app.db)
  await sql`update polling_reaktors set consecutive_failures = 1, last_error = 'boom' where reaktor_id = 'zz-cleanup'`.execute(app.db)
  app.polling.reads.changed('report-archive')
  const ids = async (query: string): Promise<string[]> => {
    const res = await call('GET', `/api/v1/polling?${query}`)
    t.equal(res.statusCode, 200, query)
    return (res.body.pollingReaktors as Array<{ reaktorDefinitionId: string }>).map((s) => s.reaktorDefinitionId)
  }
  return { app, call, ids }
}

t.test('a page: filters, sorting, total, offset, limit and the counts of all', async (t) => {
  const { call, ids } = await service(t)
  const res = await call('GET', '/api/v1/polling?limit=2')
  t.equal(res.statusCode, 200)
  t.same(Object.keys(res.body).sort(), ['counts', 'limit', 'offset', 'pollingReaktors', 'total'])
  t.match(res.body, { total: 5, offset: 0, limit: 2, counts: { all: 5, running: 2, stopped: 3, failing: 2 } })
  t.same(res.body.pollingReaktors.map((s: { reaktorDefinitionId: string }) => s.reaktorDefinitionId), ['mail-digest', 'mail-retry'])
  t.same(Object.keys(res.body.counts).sort(), ['all', 'failing', 'running', 'stopped'])

  // Without limit a page holds up to 100; the counts stay those of all, whatever the filter.
  const filtered = await call('GET', '/api/v1/polling?state=running&app=reports')
  t.match(filtered.body, { pollingReaktors: [], total: 0, offset: 0, limit: 100, counts: { all: 5, running: 2, stopped: 3, failing: 2 } })

  t.same(await ids('q=mail'), ['mail-digest', 'mail-retry'], 'q: a substring of the id')
  t.same(await ids('q=REPORTS'), ['report-archive', 'report-sync', 'zz-cleanup'], 'q: of the app name or label, without regard to case')
  t.same(await ids('q=digest%20of%20m'), ['mail-digest'], 'q: of the label')
  t.same(await ids('q=sync%20rep'), ['report-sync'], 'q: across words of one label')
  t.same(await ids('q=mailer'), ['mail-digest', 'mail-retry'])
  t.same(await ids('q=xyz'), [], 'q: no match')
  t.same(await ids('state=running'), ['mail-digest', 'mail-retry'])
  t.same(await ids('state=stopped'), ['report-archive', 'report-sync', 'zz-cleanup'])
  t.same(await ids('failing=true'), ['report-archive', 'zz-cleanup'])
  t.same(await ids('failing=false'), ['mail-digest', 'mail-retry', 'report-sync'])
  t.same(await ids('app=mailer'), ['mail-digest', 'mail-retry'])
  t.same(await ids('app=Mailer'), [], 'app: exact')
  t.same(await ids('app=report'), [], 'app: the whole name')
  t.same(await ids('app=reports&failing=false'), ['report-sync'], 'filters combine')
  t.same(await ids('q=re&state=stopped&failing=true&sort=consecutiveFailures&order=desc'), ['report-archive', 'zz-cleanup'])
  t.same(await ids('sort=interval'), ['report-sync', 'mail-retry', 'mail-digest', 'report-archive', 'zz-cleanup'], 'interval: by length, 90m between 1h and 2h')
  t.same(await ids('sort=interval&order=desc'), ['zz-cleanup', 'report-archive', 'mail-digest', 'mail-retry', 'report-sync'])
  t.same(await ids('sort=label'), ['mail-digest', 'report-sync', 'mail-retry', 'report-archive', 'zz-cleanup'], 'label: nulls last, ties by id')
  t.same(await ids('sort=label&order=desc'), ['report-sync', 'mail-digest', 'mail-retry', 'report-archive', 'zz-cleanup'], 'label desc: nulls still last, ties still by id ascending')
  t.same(await ids('sort=app&order=desc'), ['report-archive', 'report-sync', 'zz-cleanup', 'mail-digest', 'mail-retry'], 'app desc: ties by id ascending')
  t.same(await ids('sort=state'), ['mail-digest', 'mail-retry', 'report-archive', 'report-sync', 'zz-cleanup'])
  t.same(await ids('sort=id&order=desc'), ['zz-cleanup', 'report-sync', 'report-archive', 'mail-retry', 'mail-digest'])
  t.same(await ids('sort=consecutiveFailures&order=desc'), ['report-archive', 'zz-cleanup', 'mail-digest', 'mail-retry', 'report-sync'])
  t.same(await ids('sort=nextRun&order=desc&limit=3'), (await ids('sort=nextRun&order=desc')).slice(0, 3))
  t.same((await ids('sort=nextRun')).slice(2), ['report-archive', 'report-sync', 'zz-cleanup'], 'nextRun: the stopped (null) last, by id')
  t.same((await ids('sort=owner&order=desc')).slice(2), ['report-archive', 'report-sync', 'zz-cleanup'], 'owner desc: nulls last')
  t.same(await ids('offset=3'), ['report-sync', 'zz-cleanup'])
  t.same(await ids('offset=5'), [], 'past the end: an empty page')
  t.match((await call('GET', '/api/v1/polling?offset=7&limit=1')).body, { pollingReaktors: [], total: 5, offset: 7, limit: 1 })
  t.match((await call('GET', '/api/v1/polling?offset=1000000000&limit=1000')).body, { pollingReaktors: [], total: 5, offset: 1_000_000_000, limit: 1000 }, 'the largest offset and limit')
})

t.test('paging with offset lists every reaktor once, in the order of the whole list', async (t) => {
  const { ids } = await service(t)
  for (const query of ['sort=id', 'sort=label&order=desc', 'sort=app', 'sort=nextRun&order=desc', 'state=stopped&sort=consecutiveFailures']) {
    const whole = await ids(`${query}&limit=1000`)
    const paged: string[] = []
    for (let offset = 0; offset < whole.length + 2; offset += 2) paged.push(...await ids(`${query}&limit=2&offset=${offset}`))
    t.same(paged, whole, `${query}: pages of 2 make up the whole`)
    t.equal(new Set(paged).size, paged.length, `${query}: no id twice`)
  }
  t.same(await ids('limit=1000'), await ids('sort=id&order=asc&offset=0'), 'the defaults: sort by id, ascending, from 0')
})

t.test('every bad value is a 400 with the error body, naming the parameter', async (t) => {
  const { call } = await service(t)
  const TEXT = 'characters, without NUL or unpaired surrogate characters, given once$'
  const cases: Array<[string, RegExp]> = [
    ['q=', new RegExp(`^q must be 1 to 200 ${TEXT}`)],
    [`q=${'x'.repeat(201)}`, /^q must be 1 to 200 /],
    ['q=a%00b', /^q must be 1 to 200 /],
    ['q=a&q=b', /^q must be .*given once$/],
    ['state=paused', /^state must be running or stopped, given once$/],
    ['state=RUNNING', /^state must be running or stopped/],
    ['state=running&state=stopped', /^state must be running or stopped, given once$/],
    ['failing=yes', /^failing must be true or false, given once$/],
    ['failing=1', /^failing must be true or false/],
    ['failing=', /^failing must be true or false/],
    ['app=', new RegExp(`^app must be an app name: 1 to 214 ${TEXT}`)],
    [`app=${'a'.repeat(215)}`, /^app must be an app name: 1 to 214 /],
    ['app=%00', /^app must be an app name/],
    ['sort=name', /^sort must be one of id, label, app, state, interval, lastRun, nextRun, lastSuccessAt, consecutiveFailures, owner, lastOutcome \(default id\), given once$/],
    ['sort=reaktorDefinitionId', /^sort must be one of /],
    ['sort=id&sort=label', /^sort must be one of .*given once$/],
    ['order=up', /^order must be asc or desc \(default asc\), given once$/],
    ['order=ASC', /^order must be asc or desc/],
    ['limit=0', /^limit must be an integer from 1 to 1000 \(default 100\)$/],
    ['limit=1001', /^limit must be an integer from 1 to 1000/],
    ['limit=abc', /^limit must be an integer from 1 to 1000/],
    ['limit=1e2', /^limit must be an integer from 1 to 1000/],
    ['limit=0x10', /^limit must be an integer from 1 to 1000/],
    ['limit=-1', /^limit must be an integer from 1 to 1000/],
    ['limit=', /^limit must be an integer from 1 to 1000/],
    ['limit=5&limit=6', /^limit must be an integer from 1 to 1000/],
    ['offset=-1', /^offset must be an integer from 0 to 1000000000 \(default 0\), given once$/],
    ['offset=1000000001', /^offset must be an integer from 0 to 1000000000/],
    ['offset=1.5', /^offset must be an integer from 0/],
    ['offset=abc', /^offset must be an integer from 0/],
    ['offset=%2010', /^offset must be an integer from 0/],
    [`offset=${'9'.repeat(400)}`, /^offset must be an integer from 0/],
    ['offset=1&offset=2', /^offset must be an integer from 0/],
    ['state=running&limit=0', /^limit must be/]
  ]
  for (const [query, message] of cases) {
    const res = await call('GET', `/api/v1/polling?${query}`)
    t.equal(res.statusCode, 400, `${query.slice(0, 40)}: 400`)
    t.same(Object.keys(res.body).sort(), ['error', 'message', 'statusCode'], `${query.slice(0, 40)}: the error body`)
    t.match(res.body, { statusCode: 400, error: 'Bad Request', message }, `${query.slice(0, 40)}: names the parameter`)
  }
  // Parameters the list does not know are ignored: the whole list, as without any.
  const unknown = await call('GET', '/api/v1/polling?page=2&foo=bar')
  t.equal(unknown.statusCode, 200)
  t.same(Object.keys(unknown.body), ['pollingReaktors'])
  t.equal(unknown.body.pollingReaktors.length, 5)
})
