/**
 * The reset command finds a user as the API does: its name compared with lower() in PostgreSQL on
 * both sides, the way the unique index compares them. JavaScript's toLowerCase differs from it
 * (a final sigma, locales lower() leaves alone), so such a user was "not found" by the command
 * while `GET /api/v1/users/{username}` found it.
 */
import t from 'tap'
import { resetPassword } from '../../src/auth/reset-password.js'
import { build } from '../helpers/app.js'
import { ADMIN_ENV, loginToken, tokenHeader } from '../helpers/auth.js'

t.test('the reset command finds a user whose name JavaScript lowercases otherwise than PostgreSQL', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const admin = await loginToken(app)
  const created = await app.inject({ method: 'POST', url: '/api/v1/users', headers: tokenHeader(admin), payload: { username: 'ΟΔΟΣ', role: 'operator' } })
  t.equal(created.statusCode, 201)
  t.equal((await app.inject({ method: 'GET', url: '/api/v1/users/%CE%9F%CE%94%CE%9F%CE%A3', headers: tokenHeader(admin) })).statusCode, 200, 'the API finds it by its own name')

  const reset = await resetPassword(app.db, 'ΟΔΟΣ', 'not-a-usable-hash', { node: 'lookup-test', via: 'command line' })
  t.same(reset, { username: 'ΟΔΟΣ', enabled: false }, 'so does the command')
})
