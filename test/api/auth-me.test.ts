/**
 * `GET /api/v1/auth/me` with each kind of credential: who and what it is, nothing secret, never
 * cached; refused without one, with the browser's session cookie alone, and once revoked.
 */
import t from 'tap'
import { SESSION_COOKIE } from '../../src/auth/types.js'
import { ADMIN, ADMIN_ENV, apiAs, createApiToken, loginToken } from '../helpers/auth.js'
import { build } from '../helpers/app.js'

t.test('a login session and an API token: user, role, kind and expiry, no-store, nothing secret', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const session = await loginToken(app)
  const created = await createApiToken(app, session, { name: 'me test', expiresIn: '1d' })

  for (const [token, kind] of [[session, 'session'], [created.token, 'token']] as const) {
    const res = await app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: { 'x-service-token': token } })
    t.equal(res.statusCode, 200, kind)
    t.equal(res.headers['cache-control'], 'no-store', `${kind}: never cached`)
    const body = res.json()
    t.same(Object.keys(body).sort(), kind === 'token' ? ['expiresAt', 'kind', 'role', 'tokenId', 'username'] : ['expiresAt', 'kind', 'role', 'username'], `${kind}: these fields only`)
    t.match(body, { username: ADMIN.username, role: 'admin', kind })
    t.ok(Date.parse(body.expiresAt) > Date.now(), `${kind}: when it ends`)
    t.notOk(res.body.includes(token) || res.body.includes(ADMIN.password), `${kind}: neither the token nor the password in the answer`)
  }
  const { body } = await apiAs(app, created.token)('GET', '/api/v1/auth/me')
  t.equal(body.tokenId, created.id, 'the API token by its id, what DELETE /api/v1/tokens/{id} names')

  // Refused: no credential, the browser cookie alone (never an API credential), a revoked token.
  const refused = [
    await app.inject({ method: 'GET', url: '/api/v1/auth/me' }),
    await app.inject({ method: 'GET', url: '/api/v1/auth/me', cookies: { [SESSION_COOKIE]: session } })
  ]
  t.equal((await apiAs(app, session)('DELETE', `/api/v1/tokens/${created.id}`)).statusCode, 200)
  refused.push(await app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: { 'x-service-token': created.token } }))
  for (const res of refused) {
    t.equal(res.statusCode, 401)
    t.same(Object.keys(res.json()).sort(), ['error', 'message', 'statusCode'])
  }
})
