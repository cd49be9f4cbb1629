/**
 * The audit rows of account changes, one table: each change of users, of one's own password and
 * of API tokens writes exactly its row (actor, address, node, targets, details); each refused one
 * (400, 403, 404, 409) writes none, except a wrong current password, which is recorded as the
 * failed login it counts as.
 */
import t from 'tap'
import { sql } from 'kysely'
import type { FastifyInstance } from 'fastify'
import { build } from '../helpers/app.js'
import { ADMIN, ADMIN_ENV, loginToken, sessionToken, tokenHeader } from '../helpers/auth.js'
import { waitFor } from '../helpers/timing.js'

interface Row { action: string, actor: string | null, address: string | null, node: string, targets: string[], details: Record<string, unknown> }

async function rowsAfter (app: FastifyInstance, id: number): Promise<Row[]> {
  const { rows } = await sql<Row>`select action, actor, address, node, targets, details from audit where id > ${id} order by id`.execute(app.db)
  return rows
}

async function lastId (app: FastifyInstance): Promise<number> {
  const { rows } = await sql<{ id: number | null }>`select max(id)::int as id from audit`.execute(app.db)
  return rows[0].id ?? 0
}

t.test('every account change writes its one row; refused ones write none', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const node = app.config.nodeId
  const admin = await loginToken(app)
  const send = async (token: string, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, address: string, payload?: object): Promise<{ statusCode: number, body: any }> => {
    const res = await app.inject({ method, url, headers: tokenHeader(token), remoteAddress: address, ...(payload === undefined ? {} : { payload }) })
    return { statusCode: res.statusCode, body: res.json() }
  }
  const carolPassword = 'carol\'s first password'
  const carolNext = 'carol\'s second password'
  let carol = ''
  let tokenId = ''

  const changes: Array<{ what: string, act: () => Promise<number>, status: number, row: () => Omit<Row, 'node'> }> = [
    {
      what: 'create a user',
      act: async () => (await send(admin, 'POST', '/api/v1/users', '10.1.0.1', { username: 'carol', role: 'operator', password: carolPassword })).statusCode,
      status: 201,
      row: () => ({ action: 'user.create', actor: ADMIN.username, address: '10.1.0.1', targets: ['carol'], details: { role: 'operator', generatedPassword: false } })
    },
    {
      what: 'change a role',
      act: async () => (await send(admin, 'PATCH', '/api/v1/users/Carol', '10.1.0.2', { role: 'admin' })).statusCode,
      status: 200,
      row: () => ({ action: 'user.role_change', actor: ADMIN.username, address: '10.1.0.2', targets: ['carol'], details: { from: 'operator', to: 'admin' } })
    },
    {
      what: 'disable a user',
      act: async () => (await send(admin, 'PATCH', '/api/v1/users/carol', '10.1.0.3', { disabled: true })).statusCode,
      status: 200,
      row: () => ({ action: 'user.disable', actor: ADMIN.username, address: '10.1.0.3', targets: ['carol'], details: {} })
    },
    {
      what: 'enable a user',
      act: async () => (await send(admin, 'PATCH', '/api/v1/users/carol', '10.1.0.4', { disabled: false })).statusCode,
      status: 200,
      row: () => ({ action: 'user.enable', actor: ADMIN.username, address: '10.1.0.4', targets: ['carol'], details: {} })
    },
    {
      what: 'reset a password',
      act: async () => (await send(admin, 'POST', '/api/v1/users/carol/password', '10.1.0.5', { password: carolPassword })).statusCode,
      status: 200,
      row: () => ({ action: 'user.password_reset', actor: ADMIN.username, address: '10.1.0.5', targets: ['carol'], details: { generatedPassword: false } })
    },
    {
      what: 'change one\'s own password',
      act: async () => {
        carol = await loginToken(app, { username: 'carol', password: carolPassword })
        return (await send(carol, 'POST', '/api/v1/auth/password', '10.1.0.6', { currentPassword: carolPassword, newPassword: carolNext })).statusCode
      },
      status: 200,
      row: () => ({ action: 'auth.password_change', actor: 'carol', address: '10.1.0.6', targets: ['carol'], details: {} })
    },
    {
      what: 'create an API token',
      act: async () => {
        const res = await send(admin, 'POST', '/api/v1/tokens', '10.1.0.7', { name: 'audit script' })
        tokenId = res.body.id
        return res.statusCode
      },
      status: 201,
      row: () => ({ action: 'token.create', actor: ADMIN.username, address: '10.1.0.7', targets: [tokenId], details: { name: 'audit script', owner: ADMIN.username, expiresAt: null } })
    },
    {
      what: 'revoke an API token (its id sent in capitals)',
      act: async () => (await send(admin, 'DELETE', `/api/v1/tokens/${tokenId.toUpperCase()}`, '10.1.0.8')).statusCode,
      status: 200,
      row: () => ({ action: 'token.revoke', actor: ADMIN.username, address: '10.1.0.8', targets: [tokenId], details: { name: 'audit script', owner: ADMIN.username } })
    },
    {
      what: 'delete a user',
      act: async () => (await send(admin, 'DELETE', '/api/v1/users/CAROL', '10.1.0.9')).statusCode,
      status: 200,
      row: () => ({ action: 'user.delete', actor: ADMIN.username, address: '10.1.0.9', targets: ['carol'], details: { role: 'admin' } })
    }
  ]
  for (const change of changes) {
    const before = await lastId(app)
    t.equal(await change.act(), change.status, `${change.what}: ${change.status}`)
    // Rows of logins made on the way (carol's) are not this change's.
    const rows = (await rowsAfter(app, before)).filter((r) => r.action !== 'auth.login')
    t.same(rows, [{ ...change.row(), node }], `${change.what}: exactly its row`)
  }

  // Refused: nothing changed, nothing recorded.
  const operator = await sessionToken(app, 'olga')
  const kept = await send(admin, 'POST', '/api/v1/tokens', '10.2.0.1', { name: 'kept' })
  t.equal(kept.statusCode, 201)
  const adminToken = kept.body.token as string
  const refused: Array<[string, () => Promise<number>, number]> = [
    ['an operator creating a user', async () => (await send(operator, 'POST', '/api/v1/users', '10.2.0.2', { username: 'dave', role: 'admin' })).statusCode, 403],
    ['an operator disabling an admin', async () => (await send(operator, 'PATCH', `/api/v1/users/${ADMIN.username}`, '10.2.0.2', { disabled: true })).statusCode, 403],
    ['an invalid username', async () => (await send(admin, 'POST', '/api/v1/users', '10.2.0.3', { username: 'dave\u200b', role: 'admin' })).statusCode, 400],
    ['a taken username', async () => (await send(admin, 'POST', '/api/v1/users', '10.2.0.3', { username: ADMIN.username.toUpperCase(), role: 'admin' })).statusCode, 409],
    ['an unknown user', async () => (await send(admin, 'PATCH', '/api/v1/users/nobody', '10.2.0.3', { disabled: true })).statusCode, 404],
    ['deleting an unknown user', async () => (await send(admin, 'DELETE', '/api/v1/users/nobody', '10.2.0.3')).statusCode, 404],
    ['demoting the last admin', async () => (await send(admin, 'PATCH', `/api/v1/users/${ADMIN.username}`, '10.2.0.3', { role: 'operator' })).statusCode, 409],
    ['deleting the last admin', async () => (await send(admin, 'DELETE', `/api/v1/users/${ADMIN.username}`, '10.2.0.3')).statusCode, 409],
    ['a token minted by a token', async () => (await send(adminToken, 'POST', '/api/v1/tokens', '10.2.0.4', { name: 'minted' })).statusCode, 403],
    ['an operator revoking an admin\'s token', async () => (await send(operator, 'DELETE', `/api/v1/tokens/${String(kept.body.id)}`, '10.2.0.4')).statusCode, 404],
    ['revoking an unknown token', async () => (await send(admin, 'DELETE', '/api/v1/tokens/00000000-0000-4000-8000-000000000000', '10.2.0.4')).statusCode, 404],
    ['a short new password', async () => (await send(admin, 'POST', '/api/v1/auth/password', '10.2.0.5', { currentPassword: ADMIN.password, newPassword: 'short' })).statusCode, 400]
  ]
  for (const [what, act, status] of refused) {
    const before = await lastId(app)
    t.equal(await act(), status, `${what}: ${status}`)
    t.same(await rowsAfter(app, before), [], `${what}: no row`)
  }

  // A wrong current password counts as a failed login (docs/accounts.md): recorded as one, like a guess at
  // the login form (written after the answer, as a failed login's row is).
  const before = await lastId(app)
  t.equal((await send(admin, 'POST', '/api/v1/auth/password', '10.2.0.6', { currentPassword: 'not the password', newPassword: 'a long enough password' })).statusCode, 403)
  await waitFor(async () => (await rowsAfter(app, before)).length > 0, { what: 'the failed password check\'s row' })
  t.same(await rowsAfter(app, before), [{ action: 'auth.login_failed', actor: ADMIN.username, address: '10.2.0.6', node, targets: [], details: { route: '/api/v1/auth/password' } }],
    'one failed-login row naming the route, never the password')
})
