/**
 * Hostile bodies on the routes that change accounts: values of the wrong type are refused as sent
 * (not coerced into a name, a password or a flag), unknown fields are refused (a misspelt field is
 * not silently a no-op), and a body that is not JSON is 415. Each answer is the error body with a
 * message naming the rule, and nothing in the database changed.
 */
import t from 'tap'
import { build } from '../helpers/app.js'
import { ADMIN, ADMIN_ENV, loginToken, tokenHeader } from '../helpers/auth.js'

type App = Awaited<ReturnType<typeof build>>

interface Case {
  name: string
  method: 'POST' | 'PATCH'
  url: string
  body: string
  /** The content-type sent (application/json unless given; null: none). */
  type?: string | null
  status: number
  message: RegExp
}

const JSON_TYPE = 'application/json'

const CASES: Case[] = [
  { name: 'a number as a username', method: 'POST', url: '/api/v1/users', body: '{"username":123,"role":"operator"}', status: 400, message: /^username: must be string$/ },
  { name: 'an array as a username', method: 'POST', url: '/api/v1/users', body: '{"username":["carol"],"role":"operator"}', status: 400, message: /^username: must be string$/ },
  { name: 'an array as a role', method: 'POST', url: '/api/v1/users', body: '{"username":"carol","role":["admin"]}', status: 400, message: /^role: one of admin, operator$/ },
  { name: 'a number as a password', method: 'POST', url: '/api/v1/users', body: '{"username":"carol","role":"operator","password":123456789012345}', status: 400, message: /^password: must be string$/ },
  { name: 'an unknown field on create', method: 'POST', url: '/api/v1/users', body: '{"username":"carol","role":"operator","admin":true}', status: 400, message: /^admin: not a field of this request$/ },
  { name: 'a create sent as text/plain', method: 'POST', url: '/api/v1/users', body: '{"username":"carol","role":"operator"}', type: 'text/plain', status: 415, message: /application\/json, not text\/plain/ },
  { name: 'a create sent as a form', method: 'POST', url: '/api/v1/users', body: 'username=carol&role=operator', type: 'application/x-www-form-urlencoded', status: 415, message: /application\/json, not application\/x-www-form-urlencoded/ },
  { name: 'a body without a content-type', method: 'POST', url: '/api/v1/users', body: '{"username":"carol","role":"operator"}', type: null, status: 415, message: /application\/json \(it came without a content-type\)/ },
  { name: 'a token without a content-type', method: 'POST', url: '/api/v1/tokens', body: '{"name":"x"}', type: null, status: 415, message: /application\/json/ },
  { name: 'a string as disabled', method: 'PATCH', url: '/api/v1/users/bob', body: '{"disabled":"true"}', status: 400, message: /^disabled: must be boolean$/ },
  { name: 'a number as disabled', method: 'PATCH', url: '/api/v1/users/bob', body: '{"disabled":1}', status: 400, message: /^disabled: must be boolean$/ },
  { name: 'a misspelt field on update', method: 'PATCH', url: '/api/v1/users/bob', body: '{"disable":true}', status: 400, message: /^disable: not a field of this request$/ },
  { name: 'an update sent as text/plain', method: 'PATCH', url: '/api/v1/users/bob', body: '{"role":"admin"}', type: 'text/plain', status: 415, message: /application\/json/ },
  { name: 'a number as a reset password', method: 'POST', url: '/api/v1/users/bob/password', body: '{"password":123456789012345}', status: 400, message: /^password: must be string$/ },
  { name: 'a reset sent as text/plain', method: 'POST', url: '/api/v1/users/bob/password', body: '{}', type: 'text/plain', status: 415, message: /application\/json/ },
  { name: 'a number as one\'s own new password', method: 'POST', url: '/api/v1/auth/password', body: JSON.stringify({ currentPassword: ADMIN.password, newPassword: 123456789012345 }), status: 400, message: /^newPassword: must be string$/ },
  { name: 'an unknown field on one\'s own password', method: 'POST', url: '/api/v1/auth/password', body: JSON.stringify({ currentPassword: ADMIN.password, newPassword: 'a new long password', everywhere: true }), status: 400, message: /^everywhere: not a field of this request$/ },
  { name: 'a login sent as text/plain', method: 'POST', url: '/api/v1/auth/login', body: JSON.stringify(ADMIN), type: 'text/plain', status: 415, message: /application\/json, not text\/plain/ },
  { name: 'a number as a token name', method: 'POST', url: '/api/v1/tokens', body: '{"name":123}', status: 400, message: /^name: must be string$/ },
  { name: 'an array as a token name', method: 'POST', url: '/api/v1/tokens', body: '{"name":["x"]}', status: 400, message: /^name: must be string$/ },
  { name: 'an unknown field on a token', method: 'POST', url: '/api/v1/tokens', body: '{"name":"x","scopes":["read"]}', status: 400, message: /^scopes: not a field of this request$/ },
  { name: 'a zero-width space in a token name', method: 'POST', url: '/api/v1/tokens', body: '{"name":"deploy\\u200b"}', status: 400, message: /^name: printable characters only/ },
  { name: 'a right-to-left override in a token name', method: 'POST', url: '/api/v1/tokens', body: '{"name":"\\u202etropxe"}', status: 400, message: /^name: printable characters only/ },
  { name: 'a line separator in a token name', method: 'POST', url: '/api/v1/tokens', body: '{"name":"a\\u2028b"}', status: 400, message: /^name: printable characters only/ },
  { name: 'an expiresIn in words', method: 'POST', url: '/api/v1/tokens', body: '{"name":"x","expiresIn":"soon"}', status: 400, message: /^expiresIn: an integer and a unit/ },
  { name: 'a token sent as text/plain', method: 'POST', url: '/api/v1/tokens', body: '{"name":"x"}', type: 'text/plain', status: 415, message: /application\/json, not text\/plain/ }
]

/** Everything a refused request could have changed. */
async function snapshot (app: App): Promise<unknown> {
  const users = await app.db.selectFrom('users').select(['id', 'username', 'role', 'disabled_at', 'password_hash', 'updated_at']).orderBy('id').execute()
  const tokens = await app.db.selectFrom('api_tokens').select('id').orderBy('id').execute()
  const audit = await app.db.selectFrom('audit').select('id').orderBy('id').execute()
  return { users, tokens, audit }
}

t.test('account routes refuse bodies of the wrong type, with unknown fields or not JSON, and change nothing', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  // A login session: API tokens are created with one.
  const admin = await loginToken(app)
  const created = await app.inject({ method: 'POST', url: '/api/v1/users', headers: tokenHeader(admin), payload: { username: 'bob', role: 'operator' } })
  t.equal(created.statusCode, 201, 'bob exists for the cases that name him')

  const before = await snapshot(app)
  for (const c of CASES) {
    const type = c.type === null ? {} : { 'content-type': c.type ?? JSON_TYPE }
    const res = await app.inject({ method: c.method, url: c.url, headers: { ...tokenHeader(admin), ...type }, payload: c.body })
    const body = res.json()
    t.equal(res.statusCode, c.status, `${c.name}: ${c.status} (got ${res.body})`)
    t.same(Object.keys(body).sort(), ['error', 'message', 'statusCode'], `${c.name}: the error body`)
    t.equal(body.statusCode, c.status, `${c.name}: the status in the body`)
    t.match(body.message, c.message, `${c.name}: the message names the rule`)
  }
  t.same(await snapshot(app), before, 'no user, token or audit row changed')

  // The admin's session still works: the own-password cases did not change the password.
  const again = await app.inject({ method: 'GET', url: '/api/v1/users/bob', headers: tokenHeader(admin) })
  t.equal(again.statusCode, 200)
  t.equal(again.json().disabled, false)
})
