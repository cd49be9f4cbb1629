/**
 * API tokens on two instances sharing one database: revoking a token on one, or disabling its
 * owner, makes the other refuse it within 1 s, although it answers the token from its cache.
 */
import t from 'tap'
import { revokeUserCredentials } from '../../src/auth/sessions.js'
import { createApiToken, loginToken, sessionToken, tokenHeader, twoNodes, untilCached, whoami } from '../helpers/auth.js'
import { bound, waitFor } from '../helpers/timing.js'

/** The promise: a revocation on one instance applies on the other within 1 s. */
const PROMISE_MS = 1000
const BOUND_MS = bound(PROMISE_MS, 'notice')

t.test('a token revoked on one instance is refused on the other within 1 s', async (t) => {
  const [a, b] = await twoNodes(t)
  const session = await loginToken(a)
  const { id, token } = await createApiToken(a, session, { name: 'revoked' })
  const other = await createApiToken(a, session, { name: 'kept' })
  t.equal((await whoami(b, token)).json().kind, 'token', 'B takes a token A issued')
  await untilCached(b, token)
  await untilCached(b, other.token, 'the other token')

  const res = await a.inject({ method: 'DELETE', url: `/api/v1/tokens/${id}`, headers: tokenHeader(session) })
  t.equal(res.statusCode, 200)
  const revokedAt = Date.now()
  t.equal((await whoami(a, token)).statusCode, 401, 'at once on the instance that revoked it')
  await waitFor(async () => (await whoami(b, token)).statusCode === 401, { timeoutMs: BOUND_MS, intervalMs: 10, what: 'the token to fail on the other instance' })
  const elapsed = Date.now() - revokedAt
  t.comment(`refused on B ${elapsed} ms after the DELETE on A`)
  t.ok(elapsed <= BOUND_MS, `refused on B ${elapsed} ms after the DELETE (promise ${PROMISE_MS} ms + ${BOUND_MS - PROMISE_MS} ms margin)`)
  t.equal((await whoami(b, other.token)).statusCode, 200, 'the other token stays valid on B')
})

t.test('disabling the owner ends its tokens on both instances', async (t) => {
  const [a, b] = await twoNodes(t)
  const bob = await sessionToken(a, 'bob')
  const { token } = await createApiToken(a, bob, { name: 'bob script' })
  const alice = await createApiToken(a, await loginToken(a), { name: 'alice script' })
  for (const app of [a, b]) {
    await untilCached(app, token)
    await untilCached(app, alice.token, 'another user\'s token')
  }

  const user = await a.db.selectFrom('users').select('id').where('username', '=', 'bob').executeTakeFirstOrThrow()
  await a.db.transaction().execute(async (trx) => {
    await trx.updateTable('users').set({ disabled_at: new Date() }).where('id', '=', user.id).execute()
    await revokeUserCredentials(trx, user.id)
  })
  const disabledAt = Date.now()
  await Promise.all([a, b].map(async (app) => {
    await waitFor(async () => (await whoami(app, token)).statusCode === 401, { timeoutMs: BOUND_MS, intervalMs: 10, what: 'the disabled user\'s token to fail' })
  }))
  const elapsed = Date.now() - disabledAt
  t.comment(`refused on both instances ${elapsed} ms after the owner was disabled`)
  t.ok(elapsed <= BOUND_MS, `refused on both within ${elapsed} ms`)
  t.same(await a.db.selectFrom('api_tokens').select('name').execute(), [{ name: 'alice script' }], 'the owner\'s token rows are gone')
  for (const app of [a, b]) t.equal((await whoami(app, alice.token)).statusCode, 200, 'another user\'s token stays valid')
})
