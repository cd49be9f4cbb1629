/**
 * An app switching versions in a running service (src/apps/catalog.ts, then the scheduler's
 * registrationsChanged): a reaktor kept by the new version runs its new code from its next run
 * and keeps its state, one it adds is registered as at a first start, one it drops is stopped and
 * unlisted with its history kept, and a version that would not start is refused with nothing changed.
 */
import t from 'tap'
import type { LoadedApp } from '../../src/apps/types.js'
import type { PollingReaktorRegistration } from '../../src/sdk/types.js'
import { ADMIN_ENV, loggedIn } from '../helpers/auth.js'
import { buildLogged } from '../helpers/app.js'
import { waitFor } from '../helpers/timing.js'

/** A reaktor that counts its runs per version in `runs`. */
function counting (runs: Map<string, number>, version: string, id: string, extra: Partial<PollingReaktorRegistration> = {}): PollingReaktorRegistration {
  return {
    reaktorDefinitionId: id,
    interval: '50ms',
    createReaktor: () => async () => {
      runs.set(`${id}@${version}`, (runs.get(`${id}@${version}`) ?? 0) + 1)
      return false
    },
    ...extra
  }
}

function version (v: string, pollingReaktors: PollingReaktorRegistration[]): LoadedApp {
  return { name: 'switching', version: v, dir: undefined, publicDir: undefined, settings: {}, pollingReaktors, reaktors: [] }
}

t.test('a switch: kept ids run the new code, added ones register, dropped ones stop and leave the list', async (t) => {
  const runs = new Map<string, number>()
  const { app, audits } = await buildLogged(t, ADMIN_ENV, [{
    name: 'switching',
    version: '1.0.0',
    pollingReaktors: [counting(runs, '1', 'kept', { autoStart: true }), counting(runs, '1', 'dropped', { autoStart: true }), counting(runs, '1', 'idle')]
  }])
  const call = await loggedIn(app)
  await waitFor(() => (runs.get('kept@1') ?? 0) >= 2 && (runs.get('dropped@1') ?? 0) >= 1, { what: 'version 1 running' })

  const change = await app.appCatalog.replace('switching', version('2.0.0', [
    counting(runs, '2', 'kept', { autoStart: true }), counting(runs, '2', 'idle'), counting(runs, '2', 'added', { autoStart: true })
  ]))
  t.same(change, { app: 'switching', added: ['added'], changed: ['idle', 'kept'], removed: ['dropped'] })
  await waitFor(() => (runs.get('kept@2') ?? 0) >= 2 && (runs.get('added@2') ?? 0) >= 1, { what: 'version 2 running' })
  const droppedRuns = runs.get('dropped@1')
  const keptOld = runs.get('kept@1')

  const list = await call('GET', '/api/v1/polling')
  t.same(list.body.pollingReaktors.map((r: { reaktorDefinitionId: string }) => r.reaktorDefinitionId), ['added', 'idle', 'kept'], 'the dropped reaktor is no longer listed')
  t.equal((await call('GET', '/api/v1/polling/dropped/status')).statusCode, 404)
  t.match((await call('GET', '/api/v1/polling/kept/status')).body, { state: 'running' })
  t.match((await call('GET', '/api/v1/polling/idle/status')).body, { state: 'stopped' }, 'a stopped reaktor stays stopped')
  const stored = await app.db.selectFrom('polling_reaktors').select(['reaktor_id', 'state']).where('reaktor_id', '=', 'dropped').executeTakeFirstOrThrow()
  t.equal(stored.state, 'stopped', 'the dropped reaktor is stopped in the database')
  t.ok(await app.db.selectFrom('polling_runs').select('run_id').where('reaktor_id', '=', 'dropped').executeTakeFirst() !== undefined, 'its history stays')
  t.match(audits().filter((a) => a.action === 'polling.unregistered'), [{ targets: ['dropped'], user: null }])

  await waitFor(() => (runs.get('kept@2') ?? 0) >= 4, { what: 'more runs of version 2' })
  t.equal(runs.get('dropped@1'), droppedRuns, 'the dropped reaktor ran no more')
  t.equal(runs.get('kept@1'), keptOld, 'the kept reaktor ran no more of the old code')
})

t.test('a version that would not start is refused and nothing changes', async (t) => {
  const runs = new Map<string, number>()
  const { app } = await buildLogged(t, ADMIN_ENV, [
    { name: 'switching', version: '1.0.0', pollingReaktors: [counting(runs, '1', 'mine', { autoStart: true })] },
    { name: 'other', version: '1.0.0', pollingReaktors: [counting(runs, '1', 'theirs')] }
  ])
  await waitFor(() => (runs.get('mine@1') ?? 0) >= 1, { what: 'version 1 running' })
  await t.rejects(app.appCatalog.replace('switching', version('2.0.0', [counting(runs, '2', 'theirs')])),
    { message: 'reaktorDefinitionId "theirs" is registered twice: by app other@1.0.0 (pollingReaktors[0]) and by app switching@2.0.0 (pollingReaktors[0]); ids are unique across all apps' })
  t.equal(app.appCatalog.app('switching')?.version, '1.0.0')
  t.same([...app.apps.pollingReaktors.keys()].sort(), ['mine', 'theirs'])
  const before = runs.get('mine@1') ?? 0
  await waitFor(() => (runs.get('mine@1') ?? 0) > before, { what: 'version 1 still running' })
})
