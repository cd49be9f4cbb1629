/**
 * API tokens for scripts: the format and what is stored, what they may do (their owner's role, no
 * minting of further tokens, no browser sign-in, no logout), expiry, the last-used column, and the
 * list and revoke routes per role.
 */
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'
import t from 'tap'
import { ApiTokenStore, LAST_USED_INTERVAL_MS } from '../../src/auth/api-tokens.js'
import { SessionCache } from '../../src/auth/session-cache.js'
import { createSessionService, revokeUserCredentials } from '../../src/auth/sessions.js'
import { loadTokenTagger } from '../../src/auth/token-tag.js'
import { SESSION_COOKIE } from '../../src/auth/types.js'
import type { Database } from '../../src/db/schema.js'
import { build, metric } from '../helpers/app.js'
import { ADMIN, ADMIN_ENV, apiAs, createApiToken, loginToken, logout, sessionToken, tokenHeader, whoami, type ApiClient } from '../helpers/auth.js'
import type { TestContext } from '../helpers/test-context.js'
import { bound, waitFor } from '../helpers/timing.js'
import { createTestDatabase } from '../helpers/database.js'

/** The secret-scanner pattern docs/accounts.md documents, read from it so that the two cannot drift apart. */
const DOCUMENTED_PATTERN = new RegExp(/Secret scanners find leaked ones\s+with `([^`]+)`/.exec(readFileSync(new URL('../../docs/accounts.md', import.meta.url), 'utf8'))?.[1] ?? 'missing from docs/accounts.md')

type App = Awaited<ReturnType<typeof build>>

async function lastUsedAt (app: App, id: string): Promise<Date | null> {
  const row = await app.db.selectFrom('api_tokens').select('last_used_at').where('id', '=', id).executeTakeFirstOrThrow()
  return row.last_used_at
}

t.test('a token is the prefix and a tagged value, stored as its SHA-256 only, and acts with its owner\'s role', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const admin = await loginToken(app)
  const bobSession = await sessionToken(app, 'bob')

  const res = await apiAs(app, bobSession)('POST', '/api/v1/tokens', { name: 'nightly export' })
  t.equal(res.statusCode, 201)
  t.equal(res.headers['cache-control'], 'no-store', 'the one answer holding the token is never cached')
  t.same(Object.keys(res.body).sort(), ['createdAt', 'expiresAt', 'id', 'name', 'token'])
  const { id, token } = res.body
  t.match(token, /^reaktor_pat_[A-Za-z0-9_-]{43}$/, 'the prefix and 43 base64url characters')
  t.equal(DOCUMENTED_PATTERN.exec(`export TOKEN=${token}\n`)?.[0], token, 'found whole by the pattern the docs give scanners')
  t.equal(res.body.expiresAt, null, 'without expiresIn it never expires')
  t.equal(res.body.name, 'nightly export')

  // Nothing the database holds about the token shows it.
  const row = await app.db.selectFrom('api_tokens').selectAll().where('id', '=', id).executeTakeFirstOrThrow()
  t.same(row.token_hash, createHash('sha256').update(token).digest(), 'the SHA-256 of the whole token')
  const secret = token.slice('reaktor_pat_'.length)
  const { rows } = await sql<{ text: string }>`select concat(t::text, ' ', encode(token_hash, 'escape')) as text from api_tokens t`.execute(app.db)
  t.equal(rows.length, 1)
  t.notOk(rows[0].text.includes(secret), 'no column holds the token')
  const audit = await sql<{ text: string }>`select row_to_json(a)::text as text from audit a`.execute(app.db)
  t.notOk(audit.rows.some((r) => r.text.includes(secret)), 'nor does the audit table')
  const created = await app.db.selectFrom('audit').selectAll().where('action', '=', 'token.create').executeTakeFirstOrThrow()
  t.same(created.targets, [id])
  t.match(created.details, { name: 'nightly export', owner: 'bob' })
  t.equal(created.actor, 'bob')

  // X-Service-Token, exactly like a session token, with the owner's role.
  const me = await whoami(app, token)
  t.equal(me.statusCode, 200)
  t.same(me.json(), { username: 'bob', role: 'operator', kind: 'token', expiresAt: null })
  t.equal((await app.inject({ method: 'GET', url: '/api/v1/polling', headers: tokenHeader(token) })).statusCode, 200, 'a real API route takes it')
  const forbidden = await apiAs(app, token)('GET', '/api/v1/test/admin')
  t.equal(forbidden.statusCode, 403, 'an operator\'s token is refused an admin route')
  t.same(Object.keys(forbidden.body).sort(), ['error', 'message', 'statusCode'])
  const adminToken = (await createApiToken(app, admin, { name: 'admin script' })).token
  t.equal((await apiAs(app, adminToken)('GET', '/api/v1/test/admin')).statusCode, 200, 'an admin\'s token is let in')
})

t.test('a made-up token of the right form is refused without a lookup; the cache answers a known one', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const { token } = await createApiToken(app, await loginToken(app))
  let lookups = 0
  const find = app.apiTokens.find.bind(app.apiTokens)
  app.apiTokens.find = async (digest) => { lookups++; return await find(digest) }

  const madeUp = 'reaktor_pat_' + Buffer.alloc(32, 7).toString('base64url')
  t.equal((await whoami(app, madeUp)).statusCode, 401)
  // (Not the last character: two of its bits are base64 padding, which decoding ignores.)
  const at = 'reaktor_pat_'.length + 5
  const changed = token.slice(0, at) + (token[at] === 'A' ? 'B' : 'A') + token.slice(at + 1)
  t.equal((await whoami(app, changed)).statusCode, 401, 'one character of the random part changed')
  t.equal((await whoami(app, 'reaktor_pat_short')).statusCode, 401)
  t.equal(lookups, 0, 'none of them reached the database')

  const hits = await metric(app, 'reaktor_session_cache_hits_total')
  t.equal((await whoami(app, token)).statusCode, 200)
  t.equal((await whoami(app, token)).statusCode, 200)
  t.equal(lookups, 1, 'looked up once')
  t.equal(await metric(app, 'reaktor_session_cache_hits_total'), hits + 1, 'then answered from the session cache')
})

t.test('creating a token needs a login session, a printable name and a bounded expiresIn', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const session = await loginToken(app)
  const { token } = await createApiToken(app, session)

  const minted = await apiAs(app, token)('POST', '/api/v1/tokens', { name: 'another' })
  t.equal(minted.statusCode, 403, 'an API token cannot mint tokens')
  t.match(minted.body, { statusCode: 403, error: 'Forbidden', message: /login session/ })
  t.equal(await app.db.selectFrom('api_tokens').select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow().then((r) => r.n), 1, 'nothing was created')

  const refused: Array<[string, object]> = [
    ['an empty name', { name: '' }],
    ['no name', {}],
    ['101 characters', { name: 'x'.repeat(101) }],
    ['a newline', { name: 'line\nbreak' }],
    ['a NUL', { name: 'nul\u0000' }],
    ['DEL', { name: 'del\u007f' }],
    ['a lone surrogate', { name: 'half \ud800' }],
    ['expiresIn below a minute', { name: 'x', expiresIn: '59s' }],
    ['expiresIn of 59999ms', { name: 'x', expiresIn: '59999ms' }],
    ['expiresIn past ten years', { name: 'x', expiresIn: '3651d' }],
    ['expiresIn without a unit', { name: 'x', expiresIn: '60' }],
    ['expiresIn in words', { name: 'x', expiresIn: 'soon' }],
    ['an expiresIn too large for a number', { name: 'x', expiresIn: '999999999999999999d' }],
    ['an expiresIn longer than 20 characters', { name: 'x', expiresIn: '00000000000000000001d' }]
  ]
  for (const [what, body] of refused) {
    const res = await apiAs(app, session)('POST', '/api/v1/tokens', body)
    t.equal(res.statusCode, 400, `${what}: 400`)
    t.same(Object.keys(res.body).sort(), ['error', 'message', 'statusCode'], `${what}: the error body`)
  }
  t.match((await apiAs(app, session)('POST', '/api/v1/tokens', { name: 'x', expiresIn: '30s' })).body.message, /expiresIn must be a duration from 1m to 3650d/)

  const longest = await createApiToken(app, session, { name: '🔑'.repeat(100) })
  t.equal(longest.name, '🔑'.repeat(100), '100 characters, whatever their UTF-16 length')
  const before = Date.now()
  const minute = await createApiToken(app, session, { name: 'short-lived', expiresIn: '1m' })
  const ttl = Date.parse(minute.expiresAt!) - before
  t.ok(ttl > 55_000 && ttl < 65_000, `expires a minute after creation (${ttl} ms)`)
  const decade = await createApiToken(app, session, { name: 'long-lived', expiresIn: '3650d' })
  t.ok(Date.parse(decade.expiresAt!) > Date.now() + 3649 * 86_400_000, 'ten years is allowed')
})

t.test('a token asked for while its user is disabled or its password changed does not outlive the change', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  for (const change of ['password', 'disable'] as const) {
    const username = `racer-${change}`
    const session = await sessionToken(app, username)
    const user = await app.db.selectFrom('users').select('id').where('username', '=', username).executeTakeFirstOrThrow()
    let answer: ReturnType<ApiClient> | undefined
    // The change, as the user routes make it: the user's row locked, changed, every credential ended;
    // the token request, already past authentication, runs before it commits.
    await app.db.transaction().execute(async (trx) => {
      await trx.selectFrom('users').select('id').where('id', '=', user.id).forUpdate().execute()
      if (change === 'password') await trx.updateTable('users').set({ password_hash: 'changed' }).where('id', '=', user.id).execute()
      else await trx.updateTable('users').set({ disabled_at: sql<Date>`now()` }).where('id', '=', user.id).execute()
      await revokeUserCredentials(trx, user.id)
      let settled = false
      answer = apiAs(app, session)('POST', '/api/v1/tokens', { name: 'racing' }).finally(() => { settled = true })
      // Either it is answered, or it waits for the change: then the change commits.
      await waitFor(async () => settled || (await sql<{ n: number }>`
        select count(*)::int as n from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()`.execute(app.db)).rows[0].n > 0,
      { what: 'the token request to be answered or to wait for the change' })
    })
    const res = await answer!
    t.equal(res.statusCode, 401, `${change}: the ended session gets no token`)
    t.same(Object.keys(res.body).sort(), ['error', 'message', 'statusCode'])
    t.same(await app.db.selectFrom('api_tokens').select('id').where('user_id', '=', user.id).execute(), [], `${change}: no token of the user is stored`)
  }
})

t.test('logout with an API token answers 400 naming its DELETE, and the token keeps working', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const { id, token } = await createApiToken(app, await loginToken(app))
  const out = await logout(app, token)
  t.equal(out.statusCode, 400)
  t.same(out.json(), { statusCode: 400, error: 'Bad Request', message: `An API token is not a login session: revoke it with DELETE /api/v1/tokens/${id}` })
  t.equal((await whoami(app, token)).statusCode, 200, 'still valid')
})

t.test('the browser cookie signs in with a login session only, never with an API token', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const session = await loginToken(app)
  const { token } = await createApiToken(app, session)
  const withToken = await app.inject({ method: 'GET', url: '/', headers: { cookie: `${SESSION_COOKIE}=${token}` } })
  t.equal(withToken.statusCode, 302)
  t.equal(withToken.headers.location, '/login?redirect=%2F')
  // Also once the token is in the session cache (a check through the header put it there).
  t.equal((await whoami(app, token)).statusCode, 200)
  t.equal((await app.inject({ method: 'GET', url: '/', headers: { cookie: `${SESSION_COOKIE}=${token}` } })).statusCode, 302)
  t.equal((await app.inject({ method: 'GET', url: '/', headers: { cookie: `${SESSION_COOKIE}=${session}` } })).statusCode, 200, 'the login session\'s cookie works')
})

t.test('an expired token stops working, from the cache too', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const session = await loginToken(app)
  const { id, token } = await createApiToken(app, session, { name: 'brief', expiresIn: '1m' })
  // A minute is the shortest the API gives: bring the end nearer in the database, before the first check reads it.
  const row = await sql<{ expires_at: Date }>`update api_tokens set expires_at = now() + interval '1500 milliseconds' where id = ${id} returning expires_at`.execute(app.db)
  const expiresAt = row.rows[0].expires_at.getTime()
  const me = await whoami(app, token)
  t.equal(me.statusCode, 200)
  t.equal(me.json().expiresAt, new Date(expiresAt).toISOString())
  t.equal((await whoami(app, token)).statusCode, 200)
  // Refused from its expiry on, 1.5 s from now.
  await waitFor(async () => (await whoami(app, token)).statusCode === 401, { timeoutMs: bound(1500, 'seconds'), intervalMs: 20, what: 'the token to expire' })
  const late = Date.now() - expiresAt
  t.ok(late >= -50, `refused ${late} ms after its expiry (the database and this process share a clock)`)
  t.comment(`refused ${late} ms after expires_at`)

  const { id: pastId, token: past } = await createApiToken(app, session, { name: 'past', expiresIn: '1m' })
  await sql`update api_tokens set expires_at = now() - interval '1 second' where id = ${pastId}`.execute(app.db)
  t.equal((await whoami(app, past)).statusCode, 401, 'a token past its expiry in the database is refused on its first check')
})

t.test('last used: written at most once a minute per token, off the request path, also for cached checks', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const app = await build(t, { whoami: true, env: ADMIN_ENV, databaseUrl })
  const { id, token } = await createApiToken(app, await loginToken(app))
  t.equal(await lastUsedAt(app, id), null, 'never used yet')

  // Through the service: two uses in a row, one write.
  t.equal((await whoami(app, token)).statusCode, 200)
  await app.apiTokens.lastUsed.settled()
  const first = await lastUsedAt(app, id)
  t.ok(first !== null, 'the first use is recorded')
  t.equal((await whoami(app, token)).statusCode, 200)
  await app.apiTokens.lastUsed.settled()
  t.same(await lastUsedAt(app, id), first, 'the second use a moment later writes nothing')

  // A session service of its own, with a clock the test moves.
  let now = 0
  const cache = new SessionCache({ url: databaseUrl, applicationName: 'reaktor-sessions last-used test', log: { warn: () => {} } })
  await cache.start()
  t.teardown(async () => await cache.stop())
  const tagger = await loadTokenTagger(app.db)
  const store = new ApiTokenStore(app.db, tagger, cache, { debug: () => {} }, () => now)
  const service = createSessionService(app.db, 3_600_000, tagger, cache, store)
  const use = async (): Promise<void> => {
    t.equal((await service.verify(token))?.kind, 'token')
    await store.lastUsed.settled()
  }
  const setLastUsed = async (ago: string): Promise<Date> =>
    (await sql<{ at: Date }>`update api_tokens set last_used_at = now() - ${ago}::interval where id = ${id} returning last_used_at as at`.execute(app.db)).rows[0].at

  // The SQL guard: a node that has not written it yet still leaves a value younger than a minute.
  const recent = await setLastUsed('30 seconds')
  await use()
  t.same(await lastUsedAt(app, id), recent, 'younger than a minute in the database: not written again')
  // The per-node throttle: written a minute ago by another node, but this one wrote within its minute.
  const old = await setLastUsed('2 minutes')
  const hits = cache.hits
  await use()
  t.ok(cache.hits > hits, 'answered from the cache')
  t.same(await lastUsedAt(app, id), old, 'this node\'s own write is less than a minute old: no statement')
  now += LAST_USED_INTERVAL_MS
  await use()
  const written = await lastUsedAt(app, id)
  t.ok(written !== null && written.getTime() > old.getTime() + 60_000, 'a minute later on this node: written, from a cached check')
  t.ok(cache.hits > hits + 1, 'that check too came from the cache')
})

t.test('a failed last-used write is logged at debug and never fails the check', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const { id, token } = await createApiToken(app, await loginToken(app))
  // Reads go to the service's database; the writes to one that refuses connections.
  const unreachable = new Kysely<Database>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: 'postgres://127.0.0.1:1/none', connectionTimeoutMillis: 2000 }) }) })
  t.teardown(async () => await unreachable.destroy())
  const debug: Array<{ obj: any, msg: string }> = []
  const tagger = await loadTokenTagger(app.db)
  const store = new ApiTokenStore(unreachable, tagger, undefined, { debug: (obj, msg) => debug.push({ obj, msg }) })
  store.find = app.apiTokens.find.bind(app.apiTokens)
  const service = createSessionService(app.db, 3_600_000, tagger, undefined, store)
  t.match(await service.verify(token), { kind: 'token', tokenId: id })
  await store.lastUsed.settled()
  t.equal(debug.length, 1)
  t.match(debug[0], { obj: { tokenId: id }, msg: 'could not record when an API token was last used' })
  t.ok(debug[0].obj.err instanceof Error)
})

/** An app with the admin logged in (alice) and two operators with sessions (bob, carol): their tokens. */
async function threeUsers (t: TestContext): Promise<{ app: App, alice: string, bob: string, carol: string }> {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  return { app, alice: await loginToken(app), bob: await sessionToken(app, 'bob'), carol: await sessionToken(app, 'carol') }
}

t.test('listing: your own tokens, an admin everyone\'s with the owner; never a secret', async (t) => {
  const { app, alice, bob, carol } = await threeUsers(t)
  const a = await createApiToken(app, alice, { name: 'a1' })
  const b = await createApiToken(app, bob, { name: 'b1', expiresIn: '30d' })
  const c = await createApiToken(app, carol, { name: 'c1' })

  const mine = await apiAs(app, bob)('GET', '/api/v1/tokens')
  t.equal(mine.statusCode, 200)
  t.same(mine.body.tokens.map((x: any) => [x.name, x.owner]), [['b1', 'bob']], 'an operator sees their own')
  t.same(Object.keys(mine.body.tokens[0]).sort(), ['createdAt', 'expiresAt', 'id', 'lastUsedAt', 'name', 'owner'])
  t.match(mine.body.tokens[0], { id: b.id, createdAt: b.createdAt, expiresAt: b.expiresAt, lastUsedAt: null })
  t.same((await apiAs(app, b.token)('GET', '/api/v1/tokens')).body.tokens.map((x: any) => x.id), [b.id], 'with the token itself too')

  const all = await apiAs(app, alice)('GET', '/api/v1/tokens')
  t.same(all.body.tokens.map((x: any) => [x.id, x.name, x.owner]), [[a.id, 'a1', ADMIN.username], [b.id, 'b1', 'bob'], [c.id, 'c1', 'carol']], 'an admin sees all, oldest first')
  const text = JSON.stringify(all.body)
  for (const x of [a, b, c]) t.notOk(text.includes(x.token.slice('reaktor_pat_'.length)), `${x.name}: no secret in the list`)
})

t.test('revoking: your own or, for an admin, anyone\'s; someone else\'s, unknown and malformed ids are 404', async (t) => {
  const { app, alice, bob, carol } = await threeUsers(t)
  const c1 = await createApiToken(app, carol, { name: 'c1' })
  const c2 = await createApiToken(app, carol, { name: 'c2' })
  const b1 = await createApiToken(app, bob, { name: 'b1' })
  t.equal((await whoami(app, c1.token)).statusCode, 200)

  const unknown = await apiAs(app, bob)('DELETE', '/api/v1/tokens/00000000-0000-4000-8000-000000000000')
  t.equal(unknown.statusCode, 404)
  t.same(unknown.body, { statusCode: 404, error: 'Not Found', message: 'No API token of this id' })
  const others = await apiAs(app, bob)('DELETE', `/api/v1/tokens/${c1.id}`)
  t.same(others, { ...others, statusCode: 404, body: unknown.body }, 'another user\'s token reads as unknown to an operator')
  t.equal((await whoami(app, c1.token)).statusCode, 200, 'and stays valid')
  for (const bad of ['not-a-uuid', '00000000-0000-4000-8000-00000000000', `${c1.id}x`, '%27%20or%201%3D1--', 'x'.repeat(1000)]) {
    const res = await apiAs(app, alice)('DELETE', `/api/v1/tokens/${bad}`)
    t.equal(res.statusCode, 404, `${bad.slice(0, 40)}: 404`)
    t.same(res.body, unknown.body)
  }
  t.equal((await apiAs(app, alice)('DELETE', '/api/v1/tokens/a%00b')).statusCode, 400, 'a NUL is refused by the schema, not the database')

  const byAdmin = await apiAs(app, alice)('DELETE', `/api/v1/tokens/${c1.id}`)
  t.equal(byAdmin.statusCode, 200)
  t.same(byAdmin.body, { message: `API token ${c1.id} revoked` })
  t.equal((await whoami(app, c1.token)).statusCode, 401, 'refused at once on the node that revoked it')
  t.equal((await apiAs(app, alice)('DELETE', `/api/v1/tokens/${c1.id}`)).statusCode, 404, 'gone')
  t.equal((await whoami(app, c2.token)).statusCode, 200, 'the owner\'s other token stays valid')

  const own = await apiAs(app, carol)('DELETE', `/api/v1/tokens/${c2.id}`)
  t.equal(own.statusCode, 200, 'an operator revokes their own')
  const self = await apiAs(app, b1.token)('DELETE', `/api/v1/tokens/${b1.id}`)
  t.equal(self.statusCode, 200, 'a token may revoke itself')
  t.equal((await whoami(app, b1.token)).statusCode, 401)
  t.same(await app.db.selectFrom('api_tokens').select('id').execute(), [], 'the rows are deleted')

  const audit = await app.db.selectFrom('audit').select(['actor', 'targets', 'details']).where('action', '=', 'token.revoke').orderBy('id').execute()
  t.same(audit, [
    { actor: ADMIN.username, targets: [c1.id], details: { name: 'c1', owner: 'carol' } },
    { actor: 'carol', targets: [c2.id], details: { name: 'c2', owner: 'carol' } },
    { actor: 'bob', targets: [b1.id], details: { name: 'b1', owner: 'bob' } }
  ], 'one audit row per revocation, none for the refused ones')
})
