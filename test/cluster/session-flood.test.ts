/**
 * Made-up session tokens are refused without a database query, on every instance, while a token
 * just issued by another instance is accepted at once.
 */
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { performance } from 'node:perf_hooks'
import { promisify } from 'node:util'
import { Migrator, sql } from 'kysely'
import pg from 'pg'
import t from 'tap'
import { createDatabase } from '../../src/db/index.js'
import { migrations } from '../../src/db/migrations/index.js'
import { tokenDigest } from '../../src/auth/sessions.js'
import { build } from '../helpers/app.js'
import { ADMIN_ENV, loginToken, logout, whoami } from '../helpers/auth.js'
import { bound, deadline, waitFor } from '../helpers/timing.js'
import { createTestDatabase } from '../helpers/database.js'
import { ROOT } from '../helpers/paths.js'
import type { TestContext } from '../helpers/test-context.js'

/** Counts connections lent by the pools of the instance named `nodeId` (Kysely borrows one per query). */
function countPoolQueries (t: TestContext, nodeId: string): { readonly count: number } {
  const proto = pg.Pool.prototype as unknown as { connect: (...args: unknown[]) => unknown }
  const original = proto.connect
  const counter = { count: 0 }
  proto.connect = function (this: { options: { application_name?: string } }, ...args: unknown[]) {
    if (this.options.application_name === `reaktor-service ${nodeId}`) counter.count++
    return original.apply(this, args)
  }
  t.teardown(() => { proto.connect = original })
  return counter
}

const fakeToken = (): string => randomBytes(32).toString('base64url')

function percentile (values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p / 100))]
}

t.test('made-up tokens cost no query; a login on one instance is accepted on another at once', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const a = await build(t, { whoami: true, env: { ...ADMIN_ENV, NODE_ID: 'flood-a' }, databaseUrl })
  const b = await build(t, { whoami: true, env: { ...ADMIN_ENV, NODE_ID: 'flood-b' }, databaseUrl })
  const queries = countPoolQueries(t, 'flood-b')

  // 2,000 distinct made-up tokens, 100 at a time, plus one made-up token 500 times.
  const before = queries.count
  for (let round = 0; round < 20; round++) {
    const answers = await Promise.all(Array.from({ length: 100 }, async () => (await whoami(b, fakeToken())).statusCode))
    t.equal(answers.filter((s) => s === 401).length, 100, `round ${round + 1}: all refused`)
  }
  const repeated = fakeToken()
  for (let i = 0; i < 500; i++) if ((await whoami(b, repeated)).statusCode !== 401) t.fail('a made-up token was accepted')
  const fakeQueries = queries.count - before
  t.comment(`queries on B's pool for 2,500 made-up tokens: ${fakeQueries}`)
  t.ok(fakeQueries <= 50, `made-up tokens reach PostgreSQL at most a handful of times (background work), not per request: ${fakeQueries}`)

  // A token issued by A, used on B at once: never refused for being new (20 times over).
  for (let i = 0; i < 20; i++) {
    const token = await loginToken(a)
    t.equal((await whoami(b, token)).statusCode, 200, `fresh token ${i + 1} accepted on B at once`)
  }
  // A revoked token replayed again and again costs its lookups once, then nothing.
  const revoked = await loginToken(a)
  t.equal((await whoami(b, revoked)).statusCode, 200)
  t.equal((await logout(a, revoked)).statusCode, 200)
  // docs/accounts.md: a logout takes effect on every node within 1 s.
  await waitFor(async () => (await whoami(b, revoked)).statusCode === 401, { timeoutMs: bound(1000, 'none'), intervalMs: 10, what: 'the revoked token to fail on B' })
  const replayStart = queries.count
  for (let i = 0; i < 200; i++) if ((await whoami(b, revoked)).statusCode !== 401) t.fail('a revoked token was accepted')
  t.ok(queries.count - replayStart <= 5, `200 replays of a revoked token: ${queries.count - replayStart} queries`)
})

t.test('a legitimate request during a flood of made-up tokens (figures)', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
  const token = await loginToken(app)
  const queries = countPoolQueries(t, 'test-node')
  const timeOne = async (): Promise<number> => {
    const started = performance.now()
    const res = await fetch(`${base}/api/v1/test/whoami`, { headers: { 'x-service-token': token } })
    await res.arrayBuffer()
    if (res.status !== 200) t.fail(`legitimate request answered ${res.status}`)
    return performance.now() - started
  }
  const quiet: number[] = []
  for (let i = 0; i < 200; i++) quiet.push(await timeOne())

  const before = queries.count
  const flood = promisify(execFile)(process.execPath, ['--import', 'tsx', 'test/helpers/token-flood.ts', `${base}/api/v1/test/whoami`, '3', '20'], { cwd: ROOT })
  let done = false
  void flood.finally(() => { done = true })
  const during: number[] = []
  while (!done) during.push(await timeOne())
  const result = JSON.parse((await flood).stdout) as { total: number, perSecond: number, status4xx: number, status2xx: number }
  const floodQueries = queries.count - before
  t.equal(result.status2xx, 0, 'no made-up token was accepted')
  t.ok(result.total > 200, `the flood ran: ${result.total} requests`)
  t.comment(`flood: ${result.total} made-up tokens in 3 s (${Math.round(result.perSecond)}/s), queries on the pool meanwhile: ${floodQueries}`)
  t.comment(`legitimate GET latency, quiet: p50 ${percentile(quiet, 50).toFixed(2)} ms, p99 ${percentile(quiet, 99).toFixed(2)} ms (${quiet.length} requests)`)
  t.comment(`legitimate GET latency, during the flood: p50 ${percentile(during, 50).toFixed(2)} ms, p99 ${percentile(during, 99).toFixed(2)} ms (${during.length} requests)`)
  t.ok(during.length > 10, 'legitimate requests were answered during the flood')
  // What does reach the pool meanwhile is background work and legitimate checks made while a
  // starved event loop let the session cache's trust lapse (at most one per legitimate request).
  t.ok(floodQueries < result.total / 2, `the flood reached PostgreSQL ${floodQueries} times for ${result.total} requests, not once per request`)
})

t.test('sessions issued before tokens were tagged stay valid until they expire; afterwards untagged tokens are refused', async (t) => {
  // A database as the previous version left it: the key's migration not applied, one live session.
  const databaseUrl = await createTestDatabase(t)
  const { db } = createDatabase(databaseUrl)
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } })
  t.equal((await migrator.migrateTo('20261125000000_partitions')).error, undefined)
  // Written as that version wrote it (no username_key yet: the accounts migration derives it).
  const user = (await sql<{ id: string }>`insert into users (username, password_hash) values ('Old-Timer', 'x') returning id`.execute(db)).rows[0]
  const oldToken = fakeToken()
  await db.insertInto('sessions').values({ user_id: user.id, token_hash: tokenDigest(oldToken), expires_at: sql<Date>`now() + interval '1 hour'` }).execute()
  t.equal((await migrator.migrateToLatest()).error, undefined)
  await db.destroy()

  const app = await build(t, { whoami: true, databaseUrl })
  const me = await whoami(app, oldToken)
  t.equal(me.statusCode, 200, 'the session of the earlier format still works')
  t.equal(me.json().username, 'Old-Timer')
  t.same((await app.db.selectFrom('users').select('username_key').where('id', '=', user.id).execute()), [{ username_key: 'old-timer' }], 'the migration derived its key')

  // On a database without such sessions, a made-up untagged token is refused without a lookup.
  const fresh = await build(t, { whoami: true })
  const madeUp = fakeToken()
  const other = await fresh.db.insertInto('users').values({ username: 'x', username_key: 'x', password_hash: 'x' }).returning('id').executeTakeFirstOrThrow()
  // (Even one whose row exists, as no node of this version writes one: it stands for a lookup skipped.)
  await fresh.db.insertInto('sessions').values({ user_id: other.id, token_hash: tokenDigest(madeUp), expires_at: sql<Date>`now() + interval '1 hour'`, tagged: true }).execute()
  t.equal((await whoami(fresh, madeUp)).statusCode, 401)
})

t.test('a rolling upgrade: a node of the earlier version, still running after the migration, issues untagged tokens; they work on this version', async (t) => {
  const fresh = await build(t, { whoami: true })
  const user = await fresh.db.insertInto('users').values({ username: 'mid-upgrade', username_key: 'mid-upgrade', password_hash: 'x' }).returning('id').executeTakeFirstOrThrow()
  const refused = fakeToken()
  t.equal((await whoami(fresh, refused)).statusCode, 401, 'no untagged session live yet: a made-up token is refused')
  // The earlier version's login: a random token, its row written as that version writes it.
  const token = fakeToken()
  await fresh.db.insertInto('sessions').values({ user_id: user.id, token_hash: tokenDigest(token), expires_at: sql<Date>`now() + interval '1 hour'` }).execute()
  const me = await waitFor(async () => {
    const res = await whoami(fresh, token)
    return res.statusCode === 200 ? res : undefined
  }, { timeoutMs: deadline(2000), intervalMs: 50, what: 'the token of the earlier-version node to be accepted' })
  t.equal(me.json().username, 'mid-upgrade')
})
