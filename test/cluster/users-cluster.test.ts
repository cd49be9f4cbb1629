/**
 * Two service instances on one database: disabling, deleting or changing the password of a user on
 * one ends that user's sessions and API tokens on the other within 1 s (docs/accounts.md "Users and roles"),
 * although the other answers token checks from its cache.
 */
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build } from '../helpers/app.js'
import { ADMIN_ENV, createApiToken, loginToken, tokenHeader, twoNodes, untilCached, whoami } from '../helpers/auth.js'
import { bound, waitFor } from '../helpers/timing.js'
import { createTestDatabase } from '../helpers/database.js'

const PASSWORD = 'a long enough password'
/** The documented promise: a change on one instance applies on the other within 1 s. */
const PROMISE_MS = 1000
const BOUND_MS = bound(PROMISE_MS, 'notice')

async function call (app: FastifyInstance, token: string, method: 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object): Promise<number> {
  return (await app.inject({ method, url, headers: tokenHeader(token), payload })).statusCode
}

t.test('a disable, delete or password change on one instance ends the user\'s session and API tokens on the other within 1 s', async (t) => {
  const [a, b] = await twoNodes(t)
  const admin = await loginToken(a)

  const changes: Array<[string, (username: string, token: string) => Promise<number>, number]> = [
    ['disable', async (username) => await call(a, admin, 'PATCH', `/api/v1/users/${username}`, { disabled: true }), 200],
    ['delete', async (username) => await call(a, admin, 'DELETE', `/api/v1/users/${username}`), 200],
    ['admin password reset', async (username) => await call(a, admin, 'POST', `/api/v1/users/${username}/password`, {}), 200],
    ['own password change', async (_username, token) => await call(a, token, 'POST', '/api/v1/auth/password', { currentPassword: PASSWORD, newPassword: 'a brand new password' }), 200]
  ]
  for (const [what, change, status] of changes) {
    const username = `user-${what.replaceAll(' ', '-')}`
    t.equal(await call(a, admin, 'POST', '/api/v1/users', { username, role: 'operator', password: PASSWORD }), 201)
    const token = await loginToken(b, { username, password: PASSWORD })
    // The user's API token for scripts ends with the same change.
    const { token: apiToken } = await createApiToken(b, token, { name: `${what} script` })
    const bystander = await loginToken(b)
    // B answers both from its cache, where only a revocation notice can end them.
    await untilCached(b, token, `the session before the ${what}`)
    await untilCached(b, apiToken, `the API token before the ${what}`)

    t.equal(await change(username, token), status, `${what} on A`)
    const changedAt = performance.now()
    const refusedAfter = async (credential: string): Promise<number> => {
      await waitFor(async () => (await whoami(b, credential)).statusCode === 401, { timeoutMs: BOUND_MS, intervalMs: 5, what: `B to refuse it after the ${what}` })
      return Math.round(performance.now() - changedAt)
    }
    const [sessionMs, tokenMs] = await Promise.all([refusedAfter(token), refusedAfter(apiToken)])
    t.comment(`${what}: B refused the session ${sessionMs} ms and the API token ${tokenMs} ms after the change answered on A`)
    t.ok(sessionMs <= BOUND_MS, `${what}: the session refused on B within ${PROMISE_MS} ms (+${BOUND_MS - PROMISE_MS} ms margin): ${sessionMs} ms`)
    t.ok(tokenMs <= BOUND_MS, `${what}: the API token refused on B within ${PROMISE_MS} ms (+${BOUND_MS - PROMISE_MS} ms margin): ${tokenMs} ms`)
    t.equal((await whoami(b, bystander)).statusCode, 200, `${what}: another user's session stays valid on B`)
  }
})

t.test('a role change on one instance applies on the other within 1 s', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const a = await build(t, { env: ADMIN_ENV, databaseUrl })
  const b = await build(t, { whoami: true, env: ADMIN_ENV, databaseUrl })
  const admin = await loginToken(a)
  t.equal(await call(a, admin, 'POST', '/api/v1/users', { username: 'promoted', role: 'operator', password: PASSWORD }), 201)
  const token = await loginToken(b, { username: 'promoted', password: PASSWORD })
  const list = async (): Promise<number> => (await b.inject({ method: 'GET', url: '/api/v1/users', headers: tokenHeader(token) })).statusCode
  t.equal(await list(), 403)
  // B answers the session from its cache, with the role it read: only a notice can change it there.
  await untilCached(b, token, 'the operator\'s session on B')
  t.equal(await call(a, admin, 'PATCH', '/api/v1/users/promoted', { role: 'admin' }), 200)
  const changedAt = performance.now()
  await waitFor(async () => await list() === 200, { timeoutMs: BOUND_MS, intervalMs: 5, what: 'the new role on B' })
  const ms = Math.round(performance.now() - changedAt)
  t.comment(`role change: admin on B ${ms} ms after the change answered on A`)
  t.ok(ms <= BOUND_MS, `the same session is an admin on B within ${PROMISE_MS} ms (+${BOUND_MS - PROMISE_MS} ms margin): ${ms} ms`)
})
