/**
 * The SQL of published apps (src/apps/package-store.ts) against a real PostgreSQL: immutable
 * versions (a repeated publish is a no-op, other bytes are refused, also when two publishes race),
 * activation and rollback, deletion, node states, the NOTIFY every node hears (sent only when the
 * change commits), and listings that never read a package's bytes.
 */
import { createHash } from 'node:crypto'
import { sql, type LogEvent } from 'kysely'
import pg from 'pg'
import t from 'tap'
import { Errors, isHttpError } from '../../src/errors.js'
import {
  activateVersion, activeVersions, APPS_CHANNEL, ActiveVersionDelete, deleteApp, deleteVersion, forgetNodeStates, listApps,
  PackageVersionExists, readPackage, recordNodeState, showApp, storePackage, UnknownApp, UnknownAppVersion, type PackageInput
} from '../../src/apps/package-store.js'
import { waitFor } from '../helpers/timing.js'
import { openTestDatabase } from '../helpers/scheduler.js'

const { url, db, queries } = await openTestDatabase(t)

/** A package of these bytes (any bytes do: the store never reads inside them). */
function pkg (name: string, version: string, contents: string | Buffer = `${name}@${version}`): PackageInput {
  const bytes = Buffer.isBuffer(contents) ? contents : Buffer.from(contents)
  const sha256 = createHash('sha256').update(bytes).digest('hex')
  return { name, version, sha256, size: bytes.length, unpackedSize: bytes.length * 3, entries: 2, manifest: { name, version }, bytes }
}

/** Every payload heard on APPS_CHANNEL, by a connection of its own (as a node listens). */
const heard: string[] = []
const listener = new pg.Client({ connectionString: url })
await listener.connect()
listener.on('notification', (n) => { if (n.channel === APPS_CHANNEL) heard.push(n.payload ?? '') })
await listener.query(`listen ${APPS_CHANNEL}`)
t.teardown(async () => await listener.end())

let markers = 0
/**
 * What was heard since `from`, once everything committed before this call has been delivered: a
 * marker sent now arrives after every notification of a transaction that committed earlier.
 */
async function heardSince (from: number): Promise<string[]> {
  const marker = `marker-${++markers}`
  await sql`select pg_notify(${APPS_CHANNEL}, ${marker})`.execute(db)
  await waitFor(() => heard.includes(marker), { what: `the marker ${marker}` })
  return heard.slice(from).filter((p) => !p.startsWith('marker-'))
}

/** The SQL sent while `fn` ran. */
async function sqlOf (fn: () => Promise<unknown>): Promise<string[]> {
  const from = queries.length
  await fn()
  return queries.slice(from).map((e: LogEvent) => e.query.sql)
}

/** Sessions of this database waiting for a lock (a publish waiting on another's row). */
async function lockWaiters (): Promise<number> {
  const { rows } = await listener.query<{ n: number }>("select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'")
  return rows[0].n
}

t.test('a version is stored, listed, shown and read back; activating it is a separate choice', async (t) => {
  const from = heard.length
  const first = pkg('store-a', '1.0.0')
  t.same(await storePackage(db, first, 'ada', false), { stored: true, activated: false, previous: null })
  t.same(await heardSince(from), [], 'storing without activating changes nothing a node runs: no NOTIFY')
  t.equal((await activeVersions(db)).has('store-a'), false, 'not active')

  const [listed] = (await listApps(db)).filter((a) => a.name === 'store-a')
  t.match(listed, { name: 'store-a', activeVersion: null, changedAt: null, changedBy: null, versions: 1, latestPublishedAt: Date })

  const shown = await showApp(db, 'store-a')
  t.same(shown.versions, [{ version: '1.0.0', sha256: first.sha256, size: first.size, unpackedSize: first.size * 3, entries: 2, publishedAt: shown.versions[0].publishedAt, publishedBy: 'ada' }])
  t.equal(shown.activeVersion, null)
  t.same(await readPackage(db, 'store-a', '1.0.0'), { sha256: first.sha256, bytes: first.bytes })
  t.equal(await readPackage(db, 'store-a', '2.0.0'), undefined, 'an unknown version reads as undefined')
  const manifest = await db.selectFrom('app_packages').select('manifest').where('name', '=', 'store-a').executeTakeFirstOrThrow()
  t.same(manifest.manifest, { name: 'store-a', version: '1.0.0' }, 'the manifest is stored as JSON')

  t.same(await storePackage(db, pkg('store-a', '1.1.0'), 'bob', true), { stored: true, activated: true, previous: null })
  t.same(await heardSince(from), ['store-a'], 'store and activate: one NOTIFY of the app\'s name')
  t.equal((await activeVersions(db)).get('store-a'), '1.1.0')
  t.same(await storePackage(db, pkg('store-a', '1.2.0'), 'bob', false), { stored: true, activated: false, previous: '1.1.0' }, 'previous is the active version also when not activating')
  const [after] = (await listApps(db)).filter((a) => a.name === 'store-a')
  t.match(after, { activeVersion: '1.1.0', changedBy: 'bob', versions: 3, changedAt: Date })
})

t.test('a repeated publish of the same bytes is a no-op, still activated when asked; other bytes are refused', async (t) => {
  const from = heard.length
  const p = pkg('store-b', '1.0.0')
  await storePackage(db, p, 'ada', false)
  t.same(await storePackage(db, p, 'bob', false), { stored: false, activated: false, previous: null })
  t.same(await storePackage(db, p, 'bob', true), { stored: false, activated: true, previous: null }, 'activated when not active')
  t.same(await storePackage(db, p, 'bob', true), { stored: false, activated: false, previous: '1.0.0' }, 'and left as it is when active')
  t.same(await heardSince(from), ['store-b'], 'one NOTIFY: for the one change')
  t.equal((await showApp(db, 'store-b')).versions[0].publishedBy, 'ada', 'the stored row is the first publish\'s')

  const other = pkg('store-b', '1.0.0', 'other contents')
  const err = await storePackage(db, other, 'eve', true).catch((e: unknown) => e)
  t.ok(err instanceof PackageVersionExists, 'other bytes under a stored version: PackageVersionExists')
  t.match(err, { statusCode: 409, code: 'REAKTOR_PACKAGE_VERSION_EXISTS' })
  t.equal((err as Error).message, `App store-b@1.0.0 is already published with other contents (sha256 ${p.sha256.slice(0, 12)}…); versions are immutable: publish a new version`)
  t.equal((await readPackage(db, 'store-b', '1.0.0'))?.sha256, p.sha256, 'the stored bytes are kept')
})

t.test('a package whose digest or size does not describe its bytes is refused before any statement', async (t) => {
  const p = pkg('store-c', '1.0.0')
  const sent = await sqlOf(async () => {
    await t.rejects(storePackage(db, { ...p, sha256: '0'.repeat(64) }, null, true), /described with sha256 0{64} and size \d+, but its bytes have sha256/)
    await t.rejects(storePackage(db, { ...p, size: p.size + 1 }, null, true), /described with sha256/)
  })
  t.same(sent, [])
})

t.test('two publishes of one version with different bytes at once: exactly one wins, the other is refused', async (t) => {
  const a = pkg('race-a', '1.0.0', 'first bytes')
  const b = pkg('race-a', '1.0.0', 'second bytes')
  const results = await Promise.allSettled([storePackage(db, a, 'ada', true), storePackage(db, b, 'bob', true)])
  const won = results.filter((r) => r.status === 'fulfilled')
  const lost = results.filter((r) => r.status === 'rejected')
  t.equal(won.length, 1, 'one publish is stored')
  t.equal(lost.length, 1, 'the other is refused')
  t.ok(lost[0]?.reason instanceof PackageVersionExists, 'with PackageVersionExists')
  const winner = results[0].status === 'fulfilled' ? a : b
  t.equal((await readPackage(db, 'race-a', '1.0.0'))?.sha256, winner.sha256, 'the winner\'s bytes are stored')
})

t.test('a publish that overlaps another\'s uncommitted row waits for it, then compares with what it committed', async (t) => {
  for (const [app, secondContents, expected] of [['race-b', 'second bytes', 'refused'], ['race-c', undefined, 'a no-op']] as const) {
    const first = pkg(app, '1.0.0', 'first bytes')
    const second = pkg(app, '1.0.0', secondContents ?? 'first bytes')
    let commit = (): void => {}
    const held = new Promise<void>((resolve) => { commit = resolve })
    let stored = (): void => {}
    const inserted = new Promise<void>((resolve) => { stored = resolve })
    const holder = db.transaction().execute(async (trx) => {
      await storePackage(trx, first, 'ada', true)
      stored()
      await held
    })
    await inserted
    const racing = storePackage(db, second, 'bob', true).then((r) => r, (e: unknown) => e)
    await waitFor(async () => await lockWaiters() > 0, { what: `the second publish of ${app} to wait on the first's row` })
    commit()
    await holder
    const outcome = await racing
    if (expected === 'refused') t.ok(outcome instanceof PackageVersionExists, `${app}: other bytes are refused once the first commits`)
    else t.same(outcome, { stored: false, activated: false, previous: '1.0.0' }, `${app}: the same bytes are a no-op once the first commits`)
  }
})

t.test('activation: a change names the version it replaced, a repeat changes nothing, unknown apps and versions are named', async (t) => {
  const from = heard.length
  for (const v of ['1.0.0', '1.1.0', '2.0.0']) await storePackage(db, pkg('act-a', v), 'ada', v === '1.0.0')
  t.same(await activateVersion(db, 'act-a', '2.0.0', 'bob'), { previous: '1.0.0', changed: true })
  t.same(await activateVersion(db, 'act-a', '1.1.0', 'carl'), { previous: '2.0.0', changed: true }, 'a rollback is an activation')
  t.same(await activateVersion(db, 'act-a', '1.1.0', 'dora'), { previous: '1.1.0', changed: false })
  t.same(await heardSince(from), ['act-a', 'act-a', 'act-a'], 'one NOTIFY per change, none for the repeat')
  t.match((await showApp(db, 'act-a')), { activeVersion: '1.1.0', changedBy: 'carl' }, 'the repeat did not rewrite who changed it')

  const unknownApp = await activateVersion(db, 'act-none', '1.0.0', 'bob').catch((e: unknown) => e)
  t.ok(unknownApp instanceof UnknownApp)
  t.match(unknownApp, { statusCode: 404, code: 'REAKTOR_UNKNOWN_APP', message: 'No app named act-none is published' })
  const unknownVersion = await activateVersion(db, 'act-a', '9.9.9', 'bob').catch((e: unknown) => e)
  t.ok(unknownVersion instanceof UnknownAppVersion)
  t.match(unknownVersion, { statusCode: 404, code: 'REAKTOR_UNKNOWN_APP_VERSION', message: 'App act-a has no version 9.9.9; its versions, newest first: 2.0.0, 1.1.0, 1.0.0' })
  t.same(await heardSince(from), ['act-a', 'act-a', 'act-a'], 'refusals announce nothing')
})

t.test('an unknown version is answered with at most ten stored versions, newest first', async (t) => {
  for (let minor = 0; minor < 12; minor++) await storePackage(db, pkg('act-b', `1.${minor}.0`), null, false)
  const err = await activateVersion(db, 'act-b', '2.0.0', null).catch((e: unknown) => e)
  const newest = Array.from({ length: 10 }, (_, i) => `1.${11 - i}.0`).join(', ')
  t.equal((err as Error).message, `App act-b has no version 2.0.0; its versions, newest first: ${newest} (and 2 older)`)
  t.same((await showApp(db, 'act-b')).versions.map((v) => v.version).slice(0, 2), ['1.11.0', '1.10.0'], 'showApp lists newest first too')
})

t.test('deleting a version: the active one is refused, others go, unknown ones are named', async (t) => {
  const from = heard.length
  for (const v of ['1.0.0', '1.1.0', '2.0.0']) await storePackage(db, pkg('del-a', v), null, v === '1.1.0')
  const active = await deleteVersion(db, 'del-a', '1.1.0').catch((e: unknown) => e)
  t.ok(active instanceof ActiveVersionDelete)
  t.match(active, { statusCode: 409, code: 'REAKTOR_ACTIVE_VERSION_DELETE', message: 'App del-a@1.1.0 is active; activate another version first, or delete the app' })
  await deleteVersion(db, 'del-a', '1.0.0')
  await deleteVersion(db, 'del-a', '2.0.0')
  t.same((await showApp(db, 'del-a')).versions.map((v) => v.version), ['1.1.0'])
  await t.rejects(deleteVersion(db, 'del-a', '1.0.0'), UnknownAppVersion, 'a deleted version is unknown')
  await t.rejects(deleteVersion(db, 'del-none', '1.0.0'), UnknownApp)

  await storePackage(db, pkg('del-b', '1.0.0'), null, false)
  await deleteVersion(db, 'del-b', '1.0.0')
  t.equal((await listApps(db)).some((a) => a.name === 'del-b'), false, 'a version never activated deletes, and its app with it')
  await t.rejects(showApp(db, 'del-b'), UnknownApp)
  t.same(await heardSince(from), ['del-a'], 'only the activation was announced: deleting a version changes nothing a node runs')
})

t.test('deleting an app deletes its row, its versions and its node states in one change, announced', async (t) => {
  for (const v of ['1.0.0', '1.1.0']) await storePackage(db, pkg('del-c', v), null, v === '1.1.0')
  await recordNodeState(db, 'node-a', 'del-c', { version: '1.1.0', since: new Date(), error: null })
  await recordNodeState(db, 'node-a', 'del-d', { version: '1.0.0', since: new Date(), error: null })
  const from = heard.length
  t.same(await deleteApp(db, 'del-c'), { activeVersion: '1.1.0', versions: 2 })
  t.same(await heardSince(from), ['del-c'])
  t.equal((await activeVersions(db)).has('del-c'), false)
  t.equal(await readPackage(db, 'del-c', '1.0.0'), undefined)
  const states = await db.selectFrom('app_node_states').select('name').where('node_id', '=', 'node-a').execute()
  t.same(states.map((s) => s.name), ['del-d'], 'its node states are gone, other apps\' are kept')

  await storePackage(db, pkg('del-e', '1.0.0'), null, false)
  t.same(await deleteApp(db, 'del-e'), { activeVersion: null, versions: 1 }, 'an app never activated deletes too')
  const unknown = await deleteApp(db, 'del-c').catch((e: unknown) => e)
  t.ok(unknown instanceof UnknownApp, 'a deleted app is unknown')
  t.same(await heardSince(from), ['del-c', 'del-e'], 'the refusal announced nothing')
})

t.test('node states: recorded (replacing the last), shown with the app, forgotten for apps a node no longer runs', async (t) => {
  await storePackage(db, pkg('nodes-a', '1.0.0'), null, true)
  await storePackage(db, pkg('nodes-a', '2.0.0'), null, true)
  const since = new Date('2026-01-02T03:04:05.000Z')
  await recordNodeState(db, 'node-b', 'nodes-a', { version: '1.0.0', since, error: null })
  await recordNodeState(db, 'node-a', 'nodes-a', { version: null, since: null, error: 'the first load failed' })
  const before = await showApp(db, 'nodes-a')
  await recordNodeState(db, 'node-b', 'nodes-a', { version: '1.0.0', since, error: 'version 2.0.0 failed to load: boom' })
  const { nodes } = await showApp(db, 'nodes-a')
  t.match(nodes, [
    { nodeId: 'node-a', version: null, since: null, error: 'the first load failed', updatedAt: Date },
    { nodeId: 'node-b', version: '1.0.0', since, error: 'version 2.0.0 failed to load: boom', updatedAt: Date }
  ], 'by node id, the second record replacing the first')
  t.ok(nodes[1].updatedAt.getTime() >= before.nodes[1].updatedAt.getTime(), 'updatedAt moves with each record')

  await recordNodeState(db, 'node-b', 'nodes-x', { version: '1.0.0', since, error: null })
  await recordNodeState(db, 'node-b', 'nodes-y', { version: '1.0.0', since, error: null })
  t.equal(await forgetNodeStates(db, 'node-b', ['nodes-a']), 2, 'the node\'s states of apps not kept are deleted')
  const left = await db.selectFrom('app_node_states').select(['node_id', 'name']).where('name', 'like', 'nodes-%').orderBy('node_id').execute()
  t.same(left, [{ node_id: 'node-a', name: 'nodes-a' }, { node_id: 'node-b', name: 'nodes-a' }], 'other nodes\' states are kept')
  await recordNodeState(db, 'node-c', 'nodes-a', { version: '2.0.0', since, error: null })
  await recordNodeState(db, 'node-c', 'nodes-x', { version: '1.0.0', since, error: null })
  t.equal(await forgetNodeStates(db, 'node-c', []), 2, 'keeping nothing forgets all of a node\'s states')
  t.same(await db.selectFrom('app_node_states').select('name').where('node_id', '=', 'node-c').execute(), [])
})

t.test('the NOTIFY is delivered when the change commits, and never for a change rolled back', async (t) => {
  await storePackage(db, pkg('notify-a', '1.0.0'), null, true)
  await storePackage(db, pkg('notify-a', '2.0.0'), null, false)
  const from = heard.length

  const rolledBack = new Error('rolled back on purpose')
  const outcome = await db.transaction().execute(async (trx) => {
    t.same(await activateVersion(trx, 'notify-a', '2.0.0', 'ada'), { previous: '1.0.0', changed: true })
    t.same(await storePackage(trx, pkg('notify-a', '3.0.0'), 'ada', true), { stored: true, activated: true, previous: '2.0.0' })
    t.same(await heardSince(from), [], 'nothing is heard while the change has not committed')
    throw rolledBack
  }).catch((e: unknown) => e)
  t.equal(outcome, rolledBack)
  t.same(await heardSince(from), [], 'nor after it rolled back')
  t.equal((await activeVersions(db)).get('notify-a'), '1.0.0', 'and nothing of it is kept')
  t.equal(await readPackage(db, 'notify-a', '3.0.0'), undefined)

  await db.transaction().execute(async (trx) => {
    await deleteApp(trx, 'notify-a')
    t.same(await heardSince(from), [], 'a deletion not yet committed is not heard')
  })
  t.same(await heardSince(from), ['notify-a'], 'heard once it committed')
})

t.test('listings and activations never read a package\'s bytes (a 5 MiB package is read only by readPackage)', async (t) => {
  const big = pkg('bytes-a', '1.0.0', Buffer.alloc(5 * 1024 * 1024, 7))
  await storePackage(db, big, null, true)
  const reads = await sqlOf(async () => {
    await listApps(db)
    await showApp(db, 'bytes-a')
    await activeVersions(db)
    await activateVersion(db, 'bytes-a', '1.0.0', null)
  })
  t.ok(reads.length >= 6, `the statements were recorded (${reads.length})`)
  t.same(reads.filter((q) => q.includes('bytes')), [], 'none of them names the bytes column')
  const republish = await sqlOf(async () => await storePackage(db, big, null, true))
  t.match(republish.filter((q) => q.includes('bytes')), [/^insert into "app_packages"/], 'a republish names it only to insert (and finds the row stored)')
  const read = await sqlOf(async () => { t.ok((await readPackage(db, 'bytes-a', '1.0.0'))?.bytes.equals(big.bytes), 'read back whole') })
  t.match(read, [/"bytes"/], 'readPackage reads it')
})

t.test('the errors are in the catalogue of HTTP answers', async (t) => {
  t.equal(Errors.PackageVersionExists, PackageVersionExists)
  t.equal(Errors.UnknownApp, UnknownApp)
  t.equal(Errors.UnknownAppVersion, UnknownAppVersion)
  t.equal(Errors.ActiveVersionDelete, ActiveVersionDelete)
  t.ok(isHttpError(new UnknownApp('x')), 'their messages are shown')
})
