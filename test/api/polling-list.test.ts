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
})
