/**
 * Token checks are cached in memory, and a logout on any instance still takes effect on every
 * other instance within 1 s (LISTEN/NOTIFY; src/auth/session-cache.ts).
 */
import t from 'tap'
import { sql } from 'kysely'
import { SESSION_REVOKED_CHANNEL } from '../../src/auth/session-cache.js'
import { build, metric } from '../helpers/app.js'
import { ADMIN_ENV, loginToken, logout, whoami } from '../helpers/auth.js'
import { bound, deadline, waitFor } from '../helpers/timing.js'
import { createTestDatabase } from '../helpers/database.js'

t.test('a logout on one instance makes the token fail on another within 1 s', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const a = await build(t, { whoami: true, env: ADMIN_ENV, databaseUrl })
  const b = await build(t, { whoami: true, env: ADMIN_ENV, databaseUrl })
  const token = await loginToken(a)
  const other = await loginToken(a)

  // B verifies the token once from the database, then answers from its cache.
  t.equal((await whoami(b, token)).statusCode, 200)
  t.equal((await whoami(b, other)).statusCode, 200)
  const hits = await metric(b, 'reaktor_session_cache_hits_total')
  t.equal((await whoami(b, token)).statusCode, 200)
  t.equal(await metric(b, 'reaktor_session_cache_hits_total'), hits + 1, 'the second check on B is answered from its cache')

  const out = await logout(a, token)
  t.equal(out.statusCode, 200)
  const loggedOutAt = Date.now()
  t.equal((await whoami(a, token)).statusCode, 401, 'at once on the instance that logged out')
  // docs/accounts.md: a logout takes effect on every node within 1 s.
  await waitFor(async () => (await whoami(b, token)).statusCode === 401, { timeoutMs: bound(1000, 'none'), intervalMs: 10, what: 'the token to fail on the other instance' })
  t.ok(Date.now() - loggedOutAt <= bound(1000, 'none'), `refused on B ${Date.now() - loggedOutAt} ms after the logout`)
  t.equal((await whoami(b, other)).statusCode, 200, 'other sessions stay valid (and cached)')
})

t.test('without a confirmed revocation listener, nothing is answered from the cache', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const token = await loginToken(app)
  t.equal((await whoami(app, token)).statusCode, 200)
  // Cut the listener's connection: the cache must not vouch for anything until it is back.
  t.equal(await metric(app, 'reaktor_session_cache_trusted'), 1)
  await sql`select pg_terminate_backend(pid) from pg_stat_activity where application_name like 'reaktor-sessions%' and datname = current_database()`.execute(app.db)
  await waitFor(async () => await metric(app, 'reaktor_session_cache_trusted') === 0, { what: 'the cache to notice its listener is gone' })
  // Revoked while nobody listens on this instance: its notification never reaches the cache.
  await sql`update sessions set revoked_at = now()`.execute(app.db)
  await sql`select pg_notify(${SESSION_REVOKED_CHANNEL}, 'unrelated')`.execute(app.db)
  t.equal((await whoami(app, token)).statusCode, 401, 'the database decides while the listener is gone')
  // Once it is back, fresh checks are cached again.
  const second = await loginToken(app)
  await waitFor(async () => {
    await whoami(app, second)
    const before = await metric(app, 'reaktor_session_cache_hits_total')
    await whoami(app, second)
    return await metric(app, 'reaktor_session_cache_hits_total') > before
  }, { timeoutMs: deadline(10_000), what: 'the cache to be trusted again after a reconnect' })
  t.equal((await whoami(app, token)).statusCode, 401)
})
