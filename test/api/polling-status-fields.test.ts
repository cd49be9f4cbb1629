import t from 'tap'
import pg from 'pg'
import { readStatuses } from '../../src/polling/status.js'
import { PARTITION_LOCK_NAMESPACE } from '../../src/scheduler/index.js'
import { ADMIN_ENV, loggedIn } from '../helpers/auth.js'
import { build } from '../helpers/app.js'
import { waitFor } from '../helpers/context.js'
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
  const expected = { lastSuccessAt: SUCCESS, lastFailureAt: FAILURE, lastError: 'boom', consecutiveFailures: 1, lastDurationMs: 1234, lastOutcome: 'failed', runningSince: RUNNING }
  // The "never run" answer may still be served from the status cache (at most 100 ms: no
  // notification announces a write of run results).
  await waitFor(async () => (await call('GET', '/api/v1/polling/fields/status')).body.lastOutcome === 'failed', { what: 'status to show the written row', timeoutMs: 5000 })
  t.match((await call('GET', '/api/v1/polling/fields/status')).body, expected)
  t.match((await call('GET', '/api/v1/polling')).body.pollingReaktors[0], expected, 'the list shows them too')

  // What no notification announces is served from the status cache for at most 100 ms.
  await app.db.updateTable('polling_reaktors').where('reaktor_id', '=', 'fields').set({ running_since: null, last_outcome: 'no_work', last_duration_ms: 7 }).execute()
  for (const url of ['/api/v1/polling/fields/status', '/api/v1/polling']) {
    const status = async (): Promise<any> => { const body = (await call('GET', url)).body; return body.pollingReaktors?.[0] ?? body }
    await waitFor(async () => (await status()).lastOutcome === 'no_work', { what: `${url} to show the new outcome`, timeoutMs: 5000 })
    t.match(await status(), { runningSince: null, lastOutcome: 'no_work', lastDurationMs: 7, lastSuccessAt: SUCCESS }, url)
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
