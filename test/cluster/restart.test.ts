import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { ADMIN_ENV, loggedIn } from '../helpers/auth.js'
import { build, testConfig } from '../helpers/app.js'
import type { TestContext } from '../helpers/test-context.js'
import { waitFor } from '../helpers/timing.js'
import { createTestDatabase } from '../helpers/database.js'
import { FAST_SCHEDULER, probe } from '../helpers/scheduler.js'
import type { PollingReaktorRegistration } from '../../src/sdk/types.js'

/** One node of the service on `databaseUrl`, with these registrations. */
async function node (t: TestContext, databaseUrl: string, nodeId: string, pollingReaktors: PollingReaktorRegistration[]): Promise<FastifyInstance> {
  const config = await testConfig(t, { ...ADMIN_ENV, NODE_ID: nodeId })
  return await build(t, { config, databaseUrl, apps: [{ name: 'restart-test', version: '1.0.0', pollingReaktors }], scheduler: FAST_SCHEDULER })
}

async function states (app: FastifyInstance): Promise<Record<string, string>> {
  const call = await loggedIn(app)
  const res = await call('GET', '/api/v1/polling')
  return Object.fromEntries((res.body.pollingReaktors as Array<{ reaktorDefinitionId: string, state: string }>).map((s) => [s.reaktorDefinitionId, s.state]))
}

/** The reaktors of the restart table (docs/operating.md "Operating polling reaktors"), named after their stored state and autoStart. */
function registrations (): PollingReaktorRegistration[] {
  return [
    { id: 'new-auto', autoStart: true },
    { id: 'new-manual', autoStart: false },
    { id: 'running-auto', autoStart: true },
    { id: 'running-manual', autoStart: false },
    { id: 'stopped-auto', autoStart: true },
    { id: 'stopped-manual', autoStart: false }
  ].map(({ id, autoStart }) => probe(id, () => false, { interval: '1h', autoStart }).registration)
}

t.test('every row of the restart table, across a full restart (cluster cold start)', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const first = await node(t, databaseUrl, 'node-1', registrations())
  t.equal(first.scheduler.coldStart, true)
  t.same(await states(first), {
    'new-auto': 'running', // stopped (no record) + server startup + autoStart → running
    'new-manual': 'stopped',
    'running-auto': 'running',
    'running-manual': 'stopped',
    'stopped-auto': 'running',
    'stopped-manual': 'stopped'
  }, 'first start: no record → autoStart ? running : stopped')
  await first.scheduler.startReaktor('running-manual')
  await first.scheduler.stopReaktor('stopped-auto')
  await first.close()

  const second = await node(t, databaseUrl, 'node-2', registrations())
  t.equal(second.scheduler.coldStart, true, 'nobody else alive: a cold start')
  t.same(await states(second), {
    'new-auto': 'running',
    'new-manual': 'stopped',
    'running-auto': 'running', // running + autoStart true → running
    'running-manual': 'stopped', // running + autoStart false → stopped, a manual start is required
    'stopped-auto': 'stopped', // stopped + autoStart true → stays stopped: the operator's stop is respected
    'stopped-manual': 'stopped' // stopped + autoStart false → stopped
  })
})

t.test('a restart continues from the stored nextRun: no extra run, nextRun not overwritten', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const before = probe('hourly', () => false, { interval: '1h', autoStart: true })
  const first = await node(t, databaseUrl, 'node-1', [before.registration])
  await waitFor(() => before.runs.length === 1)
  await first.close() // flushes the run result

  const after = probe('hourly', () => false, { interval: '1h', autoStart: true })
  const second = await node(t, databaseUrl, 'node-2', [after.registration])
  const row = await second.db.selectFrom('polling_reaktors').selectAll().where('reaktor_id', '=', 'hourly').executeTakeFirstOrThrow()
  t.equal(row.state, 'running')
  t.equal(row.last_run!.getTime(), before.runs[0].lastRun, 'lastRun is the run before the restart')
  t.ok(row.next_run!.getTime() >= before.runs[0].end! + 3_600_000 - 5, 'nextRun is still one hour after it')
  await waitFor(async () => (await second.polling.reads.status('hourly')).owner === 'node-2', { what: 'node 2 to own it' })
  t.equal(after.runs.length, 0, 'no run at boot: the reaktor is not due for an hour')
})

t.test('a node joining a live cluster changes no state (rolling restart keeps autoStart:false reaktors running)', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const first = await node(t, databaseUrl, 'node-1', registrations())
  await first.scheduler.startReaktor('running-manual')
  await first.scheduler.stopReaktor('stopped-auto')
  const expected = await states(first)
  const second = await node(t, databaseUrl, 'node-2', registrations())
  t.equal(second.scheduler.coldStart, false)
  t.same(await states(second), expected, 'the joining node applied no restart rule')
  await first.close()
  t.same(await states(second), expected, 'and the leaving node changed none either')
  await waitFor(async () => (await second.polling.reads.status('running-manual')).owner === 'node-2', { what: 'node 2 to take over' })
})
