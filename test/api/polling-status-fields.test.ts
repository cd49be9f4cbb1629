import t from 'tap'
import pg from 'pg'
import { readStatuses } from '../../src/polling/status.js'
import { PARTITION_LOCK_NAMESPACE } from '../../src/scheduler/index.js'
import { ADMIN_ENV, loggedIn } from '../helpers/auth.js'
import { build } from '../helpers/app.js'
import { deadline, waitFor } from '../helpers/timing.js'
import { openTestDatabase, probe, reaktorLocks, registry } from '../helpers/scheduler.js'

const SUCCESS = '2026-11-25T08:00:00.000Z'
const FAILURE = '2026-11-25T08:05:00.000Z'
const RUNNING = '2026-11-25T08:10:00.000Z'

t.test('status and list show what the last runs did, from the row; runningSince while the owner is live', async (t) => {
  // Registered, never started: the scheduler writes nothing to the row, the test writes it all.
  const app = await build(t, { env: ADMIN_ENV, apps: [{ name: 'fields', version: '1.0.0', pollingReaktors: [probe('fields', () => false, { interval: '1h' }).registration] }] })
  const call = await loggedIn(app)
  t.match((await call('GET', '/api/v1/polling/fields/status')).body,
    { lastSuccessAt: null, lastFailureAt: null, lastDurationMs: null, lastOutcome: null, runningSince: null }, 'never run: all null')

  // A single node takes every partition, stopped reaktors' too.
  await waitFor(async () => (await reaktorLocks(app.db, 'fields')).some((l) => l.granted), { what: 'the node to hold the partition of "fields"' })
  await app.db.updateTable('polling_reaktors').where('reaktor_id', '=', 'fields').set({
    last_success_at: new Date(SUCCESS),
    last_failure_at: new Date(FAILURE),
    last_error: 'boom',
    consecutive_failures: 1,
    last_duration_ms: 1234,
    last_outcome: 'failed',
    running_since: new Date(RUNNING)
  }).execute()
  // Written behind the scheduler's back, so no notification drops the cached "never run" answer:
  // what no notification announces is served from the status cache for at most 100 ms.
  const status = async (url: string): Promise<any> => { const body = (await call('GET', url)).body; return body.pollingReaktors?.[0] ?? body }
  const shown = async (url: string, outcome: string): Promise<any> =>
    await waitFor(async () => { const body = await status(url); return body.lastOutcome === outcome ? body : undefined }, { what: `${url} to show ${outcome}`, timeoutMs: deadline(5000) })
  const expected = { lastSuccessAt: SUCCESS, lastFailureAt: FAILURE, lastError: 'boom', consecutiveFailures: 1, lastDurationMs: 1234, lastOutcome: 'failed', runningSince: RUNNING }
  t.match(await shown('/api/v1/polling/fields/status', 'failed'), expected)
  t.match(await shown('/api/v1/polling', 'failed'), expected, 'the list shows them too')

  await app.db.updateTable('polling_reaktors').where('reaktor_id', '=', 'fields').set({ running_since: null, last_outcome: 'no_work', last_duration_ms: 7 }).execute()
  for (const url of ['/api/v1/polling/fields/status', '/api/v1/polling']) {
    t.match(await shown(url, 'no_work'), { runningSince: null, lastOutcome: 'no_work', lastDurationMs: 7, lastSuccessAt: SUCCESS }, url)
  }
})

t.test('runningSince is shown only while some session holds the partition lock: a node that died leaves a stale one behind', async (t) => {
  const { url, db } = await openTestDatabase(t)
  const reaktors = registry([probe('orphan', () => false).registration])
  const partition = 5
  await db.insertInto('polling_reaktors').values({
    reaktor_id: 'orphan', state: 'running', interval: '1s', last_run: null, next_run: null, last_error: null, owner: 'dead-node',
    last_run_id: null, partition, last_success_at: new Date(SUCCESS), last_failure_at: null, last_duration_ms: 3, last_outcome: 'no_work',
    running_since: new Date(RUNNING)
  }).execute()
  await db.insertInto('reaktor_partitions').values({ partition, owner: 'dead-node' })
    .onConflict((oc) => oc.column('partition').doUpdateSet({ owner: 'dead-node' })).execute()
  const status = async (): Promise<Record<string, unknown>> => (await readStatuses({ db, reaktors, minIntervalMs: 50 }, ['orphan']))[0]

  t.match(await status(), { runningSince: null, owner: null, lastSuccessAt: SUCCESS, lastDurationMs: 3, lastOutcome: 'no_work' },
    'no session holds the partition: no run in flight is shown (the results stay)')

  const node = new pg.Client({ connectionString: url })
  await node.connect()
  t.teardown(async () => await node.end().catch(() => {}))
  await node.query('select pg_advisory_lock($1, $2)', [PARTITION_LOCK_NAMESPACE, partition])
  t.match(await status(), { runningSince: RUNNING, owner: 'dead-node' }, 'a live session holds it: shown, like the owner')

  await node.end()
  await waitFor(async () => (await status()).owner === null, { what: 'PostgreSQL to free the ended session\'s lock' })
  t.match(await status(), { runningSince: null, owner: null }, 'its session ended: hidden again')
  t.equal((await db.selectFrom('polling_reaktors').select('running_since').where('reaktor_id', '=', 'orphan').executeTakeFirstOrThrow()).running_since?.toISOString(), RUNNING,
    'while the row still holds the stale value')
})
