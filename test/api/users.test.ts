/**
 * Users and roles (docs/accounts.md "Users and roles"): the admin-only /api/v1/users routes, the rules of
 * usernames and passwords, the last enabled admin, the own-password route, and what each change
 * ends.
 */
import { createHash } from 'node:crypto'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { Migrator, sql } from 'kysely'
import { createDatabase } from '../../src/db/index.js'
import { migrations } from '../../src/db/migrations/index.js'
import { USER_ADMIN_LOCK_KEY, USER_ADMIN_LOCK_NAMESPACE } from '../../src/auth/user-admin.js'
import { build } from '../helpers/app.js'
import { ADMIN, ADMIN_ENV, apiAs, apiLogin, loginToken, whoami, type ApiClient } from '../helpers/auth.js'
import { waitFor } from '../helpers/timing.js'
import { createTestDatabase } from '../helpers/database.js'

const PASSWORD = 'a long enough password'

async function adminCall (app: FastifyInstance): Promise<ApiClient> {
  return apiAs(app, await loginToken(app))
}

/** Creates a user through the API (as `admin`) and returns its session token. */
async function userWithSession (app: FastifyInstance, admin: ApiClient, username: string, role: 'admin' | 'operator' = 'operator'): Promise<string> {
  const res = await admin('POST', '/api/v1/users', { username, role, password: PASSWORD })
  if (res.statusCode !== 201) throw new Error(`create ${username}: ${res.statusCode} ${JSON.stringify(res.body)}`)
  return await loginToken(app, { username, password: PASSWORD })
}

async function auditRows (app: FastifyInstance, action: string): Promise<Array<{ actor: string | null, targets: string[], details: Record<string, unknown> }>> {
  return await app.db.selectFrom('audit').select(['actor', 'targets', 'details']).where('action', '=', action).orderBy('id').execute()
}

const ERROR_KEYS = ['error', 'message', 'statusCode']

t.test('an operator gets 403 on every user route, an anonymous caller 401; an admin gets through', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const admin = await adminCall(app)
  const operator = apiAs(app, await userWithSession(app, admin, 'olga'))
  await admin('POST', '/api/v1/users', { username: 'victim', role: 'operator', password: PASSWORD })
  const routes: Array<[Parameters<ApiClient>[0], string, object | undefined, number]> = [
    ['GET', '/api/v1/users', undefined, 200],
    ['POST', '/api/v1/users', { username: 'made-by-op', role: 'admin', password: PASSWORD }, 201],
    ['GET', '/api/v1/users/victim', undefined, 200],
    ['PATCH', '/api/v1/users/victim', { role: 'admin' }, 200],
    ['POST', '/api/v1/users/victim/password', {}, 200],
    ['DELETE', '/api/v1/users/victim', undefined, 200]
  ]
  for (const [method, url, payload] of routes) {
    const res = await operator(method, url, payload)
    t.equal(res.statusCode, 403, `operator: ${method} ${url}`)
    t.same(Object.keys(res.body).sort(), ERROR_KEYS)
    t.equal(res.body.message, 'This needs the admin role')
    const anonymous = await app.inject({ method, url, payload })
    t.equal(anonymous.statusCode, 401, `anonymous: ${method} ${url}`)
  }
  t.equal((await app.db.selectFrom('users').select('role').where('username', '=', 'victim').executeTakeFirstOrThrow()).role, 'operator', 'nothing the operator asked was applied')
  t.equal(await app.db.selectFrom('users').select('id').where('username', '=', 'made-by-op').executeTakeFirst(), undefined)
  for (const [method, url, payload, status] of routes) {
    t.equal((await admin(method, url, payload)).statusCode, status, `admin: ${method} ${url}`)
  }
})

t.test('create: a generated password is returned once (no-store), a user is never shown with its hash, names are trimmed and unique in any case', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const admin = await adminCall(app)

  const made = await admin('POST', '/api/v1/users', { username: '  Bob  ', role: 'operator' })
  t.equal(made.statusCode, 201)
  t.equal(made.headers['cache-control'], 'no-store')
  t.same(Object.keys(made.body).sort(), ['password', 'user'])
  t.same(Object.keys(made.body.user).sort(), ['createdAt', 'disabled', 'id', 'role', 'updatedAt', 'username'])
  t.match(made.body.user, { username: 'Bob', role: 'operator', disabled: false })
  t.ok(made.body.password.length >= 12, 'the generated password keeps the length rule')
  t.equal((await apiLogin(app, { username: 'bob', password: made.body.password })).statusCode, 200, 'the generated password logs in')

  const chosen = await admin('POST', '/api/v1/users', { username: 'carol', role: 'admin', password: PASSWORD })
  t.equal(chosen.statusCode, 201)
  t.equal(chosen.body.password, undefined, 'a chosen password is not echoed')

  for (const name of ['bob', 'BOB', ' bOb ']) {
    const taken = await admin('POST', '/api/v1/users', { username: name, role: 'operator', password: PASSWORD })
    t.equal(taken.statusCode, 409, `${JSON.stringify(name)} is taken`)
    t.equal(taken.body.message, 'Username "' + name.trim() + '" is taken (usernames are compared without regard to case)')
  }

  const list = await admin('GET', '/api/v1/users')
  t.same(list.body.users.map((u: { username: string, role: string }) => [u.username, u.role]), [['alice', 'admin'], ['Bob', 'operator'], ['carol', 'admin']])
  t.notMatch(JSON.stringify(list.body), /scrypt|hash/i, 'no hash in the list')
  t.match((await admin('GET', '/api/v1/users/%20BOB%20')).body, { username: 'Bob' }, 'a lookup is trimmed and case-insensitive')
  t.equal((await admin('GET', '/api/v1/users/nobody')).statusCode, 404)
  t.equal((await admin('GET', '/api/v1/users/nobody')).body.message, 'User "nobody" does not exist')

  const created = await auditRows(app, 'user.create')
  t.same(created.map((r) => [r.actor, r.targets, r.details]), [['alice', ['Bob'], { role: 'operator', generatedPassword: true }], ['alice', ['carol'], { role: 'admin', generatedPassword: false }]])
  t.notMatch(JSON.stringify(await app.db.selectFrom('audit').selectAll().execute()), made.body.password, 'no password in the audit table')
})

t.test('names beyond ASCII are one user in any case and either Unicode form: unique, found and logged in as', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const admin = await adminCall(app)
  t.equal((await admin('POST', '/api/v1/users', { username: 'Émile Ørsted', role: 'operator', password: PASSWORD })).statusCode, 201)
  // Lower case, upper case, and the decomposed form (e + combining acute accent).
  for (const name of ['émile ørsted', 'ÉMILE ØRSTED', 'E\u0301mile Ørsted']) {
    const taken = await admin('POST', '/api/v1/users', { username: name, role: 'operator', password: PASSWORD })
    t.equal(taken.statusCode, 409, `${JSON.stringify(name)} is taken`)
    t.equal((await admin('GET', `/api/v1/users/${encodeURIComponent(name)}`)).body.username, 'Émile Ørsted', `${JSON.stringify(name)} finds the user`)
    t.equal((await apiLogin(app, { username: name, password: PASSWORD })).statusCode, 200, `${JSON.stringify(name)} logs in`)
  }
  t.equal((await admin('GET', '/api/v1/users')).body.users.length, 2, 'alice and Émile, nobody else')
})

t.test('the rules: each violation is 400 naming the field and the rule', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const admin = await adminCall(app)
  const cases: Array<[object, string]> = [
    [{ username: '   ', role: 'operator', password: PASSWORD }, 'username: at least 1 character after trimming spaces'],
    [{ username: '', role: 'operator', password: PASSWORD }, 'username: at least 1 character'],
    [{ username: 'x'.repeat(65), role: 'operator', password: PASSWORD }, 'username: at most 64 characters'],
    [{ username: 'x'.repeat(201), role: 'operator', password: PASSWORD }, 'username: at most 200 characters'],
    [{ username: 'bell\u0007', role: 'operator', password: PASSWORD }, 'username: printable characters only (no control, format, unassigned or line-separator characters)'],
    [{ username: 'zero\u200Bwidth', role: 'operator', password: PASSWORD }, 'username: printable characters only (no control, format, unassigned or line-separator characters)'],
    [{ username: 'un\u0378assigned', role: 'operator', password: PASSWORD }, 'username: printable characters only (no control, format, unassigned or line-separator characters)'],
    [{ username: 'two\u2028lines', role: 'operator', password: PASSWORD }, 'username: printable characters only (no control, format, unassigned or line-separator characters)'],
    [{ username: 'nul\u0000', role: 'operator', password: PASSWORD }, 'username: no NUL or unpaired surrogate characters'],
    [{ username: 'dave', role: 'operator', password: 'x'.repeat(11) }, 'password: at least 12 characters'],
    [{ username: 'dave', role: 'operator', password: 'x'.repeat(1025) }, 'password: at most 1,024 characters'],
    [{ username: 'dave', role: 'root', password: PASSWORD }, 'role: one of admin, operator'],
    [{ username: 'dave', password: PASSWORD }, 'role: required']
  ]
  for (const [payload, message] of cases) {
    const res = await admin('POST', '/api/v1/users', payload)
    t.equal(res.statusCode, 400, message)
    t.same(res.body, { statusCode: 400, error: 'Bad Request', message })
  }
  t.equal((await app.db.selectFrom('users').select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow()).n, 1, 'nothing was created')

  // The edges that pass: 64 characters (counted as characters, not UTF-16 units), 12 and 1,024.
  const emoji = '\u{1F600}'.repeat(64)
  t.equal((await admin('POST', '/api/v1/users', { username: emoji, role: 'operator', password: 'x'.repeat(12) })).statusCode, 201)
  t.equal((await admin('POST', '/api/v1/users', { username: 'é ü', role: 'operator', password: 'x'.repeat(1024) })).statusCode, 201)

  t.same((await admin('PATCH', '/api/v1/users/alice', {})).body.message, 'at least one field to change')
  t.same((await admin('POST', '/api/v1/users/alice/password', { password: 'short' })).body.message, 'password: at least 12 characters')
})

t.test('login finds the user by the trimmed name in any case; a disabled user cannot log in and its session ends at once', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const admin = await adminCall(app)
  const token = await userWithSession(app, admin, 'Erin')
  for (const username of ['erin', 'ERIN', '  Erin\t']) {
    const res = await apiLogin(app, { username, password: PASSWORD })
    t.equal(res.statusCode, 200, `login as ${JSON.stringify(username)}`)
    t.equal((await whoami(app, res.json().token)).json().username, 'Erin')
  }
  t.equal((await whoami(app, token)).statusCode, 200)

  const off = await admin('PATCH', '/api/v1/users/erin', { disabled: true })
  t.equal(off.statusCode, 200)
  t.equal(off.body.disabled, true)
  t.equal((await whoami(app, token)).statusCode, 401, 'the session ends at once')
  const refused = await apiLogin(app, { username: 'erin', password: PASSWORD })
  const wrong = await apiLogin(app, { username: 'erin', password: 'not the password at all' })
  t.equal(refused.statusCode, 401)
  t.same(refused.json(), wrong.json(), 'the same answer as a wrong password')

  const on = await admin('PATCH', '/api/v1/users/ERIN', { disabled: false })
  t.equal(on.body.disabled, false)
  t.equal((await whoami(app, token)).statusCode, 401, 'enabling does not bring old sessions back')
  t.equal((await apiLogin(app, { username: 'erin', password: PASSWORD })).statusCode, 200, 'enabled again: login works')
  t.same((await auditRows(app, 'user.disable')).map((r) => r.targets), [['Erin']])
  t.same((await auditRows(app, 'user.enable')).map((r) => r.targets), [['Erin']])
})

t.test('a role change applies to live sessions at once, which stay valid', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const admin = await adminCall(app)
  const frank = apiAs(app, await userWithSession(app, admin, 'frank'))
  t.equal((await frank('GET', '/api/v1/users')).statusCode, 403)
  // Right after the answer, before this node's notification may have arrived: many rounds, so
  // that a node relying on the notification alone loses at least one.
  const seen: number[] = []
  for (let round = 0; round < 20; round++) {
    const role = round % 2 === 0 ? 'admin' : 'operator'
    t.equal((await admin('PATCH', '/api/v1/users/frank', { role })).body.role, role)
    seen.push((await frank('GET', '/api/v1/users')).statusCode)
  }
  t.same(seen, Array.from({ length: 20 }, (_, round) => round % 2 === 0 ? 200 : 403), 'each new role applies to the same session at once')
  const changes = await auditRows(app, 'user.role_change')
  t.equal(changes.length, 20)
  t.same(changes.slice(0, 2).map((r) => r.details), [{ from: 'operator', to: 'admin' }, { from: 'admin', to: 'operator' }])
})

t.test('the last enabled admin cannot be demoted, disabled or deleted; with another admin, they can, oneself included', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const admin = await adminCall(app)
  const message = 'User "alice" is the last enabled admin: make another user an admin first'
  for (const [method, payload] of [['PATCH', { role: 'operator' }], ['PATCH', { disabled: true }], ['PATCH', { role: 'operator', disabled: true }], ['DELETE', undefined]] as const) {
    const res = await admin(method, '/api/v1/users/alice', payload)
    t.equal(res.statusCode, 409, `${method} ${JSON.stringify(payload)}`)
    t.same(res.body, { statusCode: 409, error: 'Conflict', message })
  }
  // A disabled admin does not count.
  await admin('POST', '/api/v1/users', { username: 'gina', role: 'admin', password: PASSWORD })
  t.equal((await admin('PATCH', '/api/v1/users/gina', { disabled: true })).statusCode, 200)
  t.equal((await admin('PATCH', '/api/v1/users/alice', { role: 'operator' })).statusCode, 409, 'a disabled admin is no other admin')
  t.match((await admin('GET', '/api/v1/users/alice')).body, { role: 'admin', disabled: false }, 'nothing half-applied')

  // An enabled one does: then an admin may even delete itself, which ends its own session.
  t.equal((await admin('PATCH', '/api/v1/users/gina', { disabled: false })).statusCode, 200)
  const own = await loginToken(app)
  t.same((await apiAs(app, own)('DELETE', '/api/v1/users/ALICE')).body, { message: 'User "alice" deleted' })
  t.equal((await whoami(app, own)).statusCode, 401, 'the deleted user\'s session ended')
  t.equal((await apiLogin(app, ADMIN)).statusCode, 401)
  t.same((await auditRows(app, 'user.delete')).map((r) => [r.actor, r.targets]), [['alice', ['alice']]])
  const gina = apiAs(app, await loginToken(app, { username: 'gina', password: PASSWORD }))
  t.equal((await gina('DELETE', '/api/v1/users/gina')).body.message, 'User "gina" is the last enabled admin: make another user an admin first')
})

t.test('concurrent changes by two admins leave one enabled admin', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const alice = await adminCall(app)
  const enabledAdmins = async (): Promise<string[]> => (await app.db.selectFrom('users').select('username')
    .where('role', '=', 'admin').where('disabled_at', 'is', null).execute()).map((u) => u.username)
  const changes = [['PATCH', { role: 'operator' }], ['PATCH', { disabled: true }], ['DELETE', undefined]] as const
  let round = 0
  for (const [method, payload] of changes) {
    for (const target of ['each other', 'themselves'] as const) {
      for (let repeat = 0; repeat < 3; repeat++) {
        const names = [`h${++round}`, `i${round}`]
        const [h, i] = await Promise.all(names.map(async (n) => apiAs(app, await userWithSession(app, alice, n, 'admin'))))
        // alice steps aside (keeping her session) so that the two are the only enabled admins.
        t.equal((await h('PATCH', '/api/v1/users/alice', { role: 'operator' })).statusCode, 200)
        const [hTarget, iTarget] = target === 'each other' ? [names[1], names[0]] : names
        const answers = await Promise.all([h(method, `/api/v1/users/${hTarget}`, payload), i(method, `/api/v1/users/${iTarget}`, payload)])
        const statuses = answers.map((a) => a.statusCode)
        const left = await enabledAdmins()
        t.equal(left.length, 1, `${method} ${JSON.stringify(payload)} on ${target}: one enabled admin left (${left.join()}; answers ${statuses.join()})`)
        t.equal(statuses.filter((s) => s === 200).length, 1, 'one change applied')
        // The other is refused: its caller is no admin any more (403) or would be the last one (409);
        // or, when the change that won disabled or deleted that caller, its session has ended (401).
        const refused = answers.find((a) => a.statusCode !== 200)
        const endsCaller = target === 'each other' && (method === 'DELETE' || 'disabled' in (payload ?? {}))
        const allowed = endsCaller ? [401, 403, 409] : [403, 409]
        t.ok(refused !== undefined && allowed.includes(refused.statusCode), `refused with ${refused?.statusCode}: ${refused?.body?.message}`)
        if (target === 'themselves') t.equal(refused?.statusCode, 409, 'stepping down: the later one is the last admin')
        // Back to alice alone.
        const survivor = left[0] === names[0] ? h : i
        t.equal((await survivor('PATCH', '/api/v1/users/alice', { role: 'admin' })).statusCode, 200)
        for (const n of names) {
          const res = await alice('DELETE', `/api/v1/users/${n}`)
          t.ok([200, 404].includes(res.statusCode), `${n} removed`)
        }
      }
    }
  }
})

t.test('a request authenticated before its caller was demoted changes nothing', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const alice = await adminCall(app)
  const hal = apiAs(app, await userWithSession(app, alice, 'hal', 'admin'))
  let answer: ReturnType<ApiClient> | undefined
  // Another change holds the lock while hal's request, already past authentication, waits for it.
  await app.db.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(${USER_ADMIN_LOCK_NAMESPACE}, ${USER_ADMIN_LOCK_KEY})`.execute(trx)
    answer = hal('POST', '/api/v1/users', { username: 'made-by-hal', role: 'admin', password: PASSWORD })
    await waitFor(async () => (await sql<{ n: number }>`
      select count(*)::int as n from pg_locks where locktype = 'advisory' and not granted and classid = ${USER_ADMIN_LOCK_NAMESPACE}`.execute(app.db)).rows[0].n === 1,
    { what: 'the request to wait for the lock' })
    await trx.updateTable('users').set({ role: 'operator' }).where('username', '=', 'hal').execute()
  })
  const res = await answer
  t.equal(res?.statusCode, 403)
  t.equal(res?.body.message, 'This needs the admin role')
  t.equal(await app.db.selectFrom('users').select('id').where('username', '=', 'made-by-hal').executeTakeFirst(), undefined, 'nothing created')
})

t.test('a request whose session or token ended while it waited for another change changes nothing', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const alice = await adminCall(app)
  const halSession = await userWithSession(app, alice, 'hal', 'admin')
  const halToken = (await apiAs(app, halSession)('POST', '/api/v1/tokens', { name: 'hal script' })).body.token as string
  for (const [kind, credential] of [['session', halSession], ['token', halToken]] as const) {
    const username = `made-with-${kind}`
    let answer: ReturnType<ApiClient> | undefined
    // Another change holds the lock while hal's request, already past authentication, waits for it;
    // meanwhile hal's credential ends (a logout, a revoked token: neither takes the lock).
    await app.db.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(${USER_ADMIN_LOCK_NAMESPACE}, ${USER_ADMIN_LOCK_KEY})`.execute(trx)
      answer = apiAs(app, credential)('POST', '/api/v1/users', { username, role: 'admin', password: PASSWORD })
      await waitFor(async () => (await sql<{ n: number }>`
        select count(*)::int as n from pg_locks where locktype = 'advisory' and not granted and classid = ${USER_ADMIN_LOCK_NAMESPACE}`.execute(app.db)).rows[0].n === 1,
      { what: 'the request to wait for the lock' })
      const digest = createHash('sha256').update(credential).digest()
      if (kind === 'session') await app.db.updateTable('sessions').set({ revoked_at: sql<Date>`now()` }).where('token_hash', '=', digest).execute()
      else await app.db.deleteFrom('api_tokens').where('token_hash', '=', digest).execute()
    })
    const res = await answer
    t.equal(res?.statusCode, 401, `${kind}: refused as ended`)
    t.same(Object.keys(res?.body ?? {}).sort(), ERROR_KEYS)
    t.equal(await app.db.selectFrom('users').select('id').where('username', '=', username).executeTakeFirst(), undefined, `${kind}: nothing created`)
  }
})

t.test('an admin password reset ends the user\'s sessions; the new password works, the old does not', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const admin = await adminCall(app)
  const token = await userWithSession(app, admin, 'ivan')
  const reset = await admin('POST', '/api/v1/users/IVAN/password', {})
  t.equal(reset.statusCode, 200)
  t.equal(reset.headers['cache-control'], 'no-store')
  t.ok(reset.body.password.length >= 12)
  t.equal((await whoami(app, token)).statusCode, 401, 'the session ended')
  t.equal((await apiLogin(app, { username: 'ivan', password: PASSWORD })).statusCode, 401, 'the old password no longer works')
  t.equal((await apiLogin(app, { username: 'ivan', password: reset.body.password })).statusCode, 200)
  const chosen = await admin('POST', '/api/v1/users/ivan/password', { password: 'chosen by the admin' })
  t.equal(chosen.body.password, undefined)
  t.equal((await apiLogin(app, { username: 'ivan', password: 'chosen by the admin' })).statusCode, 200)
  t.same((await auditRows(app, 'user.password_reset')).map((r) => [r.targets, r.details]), [[['ivan'], { generatedPassword: true }], [['ivan'], { generatedPassword: false }]])
  t.equal((await admin('POST', '/api/v1/users/nobody/password', {})).statusCode, 404)
  t.equal((await admin('PATCH', '/api/v1/users/nobody', { role: 'admin' })).statusCode, 404)
  t.equal((await admin('DELETE', '/api/v1/users/nobody')).statusCode, 404)
})

t.test('own password: a wrong current one is 403 and counts like a failed login; a change ends every session, this one too', async (t) => {
  const app = await build(t, { whoami: true, env: { ...ADMIN_ENV, LOGIN_RATE_LIMIT: '2' } })
  const admin = await adminCall(app)
  const token = await userWithSession(app, admin, 'judy')
  const other = await loginToken(app, { username: 'judy', password: PASSWORD })
  const judy = apiAs(app, token)

  const short = await judy('POST', '/api/v1/auth/password', { currentPassword: PASSWORD, newPassword: 'short' })
  t.same(short.body, { statusCode: 400, error: 'Bad Request', message: 'newPassword: at least 12 characters' })
  const wrong = await judy('POST', '/api/v1/auth/password', { currentPassword: 'not my password', newPassword: 'my new password!' })
  t.same(wrong.body, { statusCode: 403, error: 'Forbidden', message: 'The current password is wrong' })
  t.equal((await whoami(app, token)).statusCode, 200, 'a wrong password ends nothing')

  const changed = await judy('POST', '/api/v1/auth/password', { currentPassword: PASSWORD, newPassword: 'my new password!' })
  t.equal(changed.statusCode, 200)
  t.equal(changed.body.message, 'Password changed; every session and API token of yours has ended: log in again')
  t.equal((await whoami(app, token)).statusCode, 401, 'the calling session ended')
  t.equal((await whoami(app, other)).statusCode, 401, 'the other session ended')
  t.equal((await apiLogin(app, { username: 'judy', password: PASSWORD })).statusCode, 401)
  const fresh = apiAs(app, await loginToken(app, { username: 'judy', password: 'my new password!' }))
  t.same((await auditRows(app, 'auth.password_change')).map((r) => [r.actor, r.targets, r.details]), [['judy', ['judy'], {}]])

  // LOGIN_RATE_LIMIT=2 (the right password above started the count afresh): two wrong ones spend it.
  for (let i = 0; i < 2; i++) {
    t.equal((await fresh('POST', '/api/v1/auth/password', { currentPassword: 'wrong again', newPassword: 'another new password' })).statusCode, 403)
  }
  const limited = await fresh('POST', '/api/v1/auth/password', { currentPassword: 'my new password!', newPassword: 'another new password' })
  t.equal(limited.statusCode, 429, 'past the budget even with the right password')
  t.ok(Number(limited.headers['retry-after']) > 0)
  t.equal((await apiLogin(app, { username: 'judy', password: 'my new password!' })).statusCode, 429, 'the login shares that budget')
})

t.test('a login racing a password change or a disable leaves no live session', async (t) => {
  const app = await build(t, { whoami: true, env: ADMIN_ENV })
  const admin = await adminCall(app)
  await userWithSession(app, admin, 'kim')
  const user = await app.db.selectFrom('users').selectAll().where('username', '=', 'kim').executeTakeFirstOrThrow()

  for (const change of ['password', 'disable'] as const) {
    // The change holds the user's row while a login that checked the old password stores its session.
    let pending: Promise<{ token: string } | null> | undefined
    await app.db.transaction().execute(async (trx) => {
      if (change === 'password') await trx.updateTable('users').set({ password_hash: 'changed' }).where('id', '=', user.id).execute()
      else await trx.updateTable('users').set({ disabled_at: sql<Date>`now()` }).where('id', '=', user.id).execute()
      await trx.updateTable('sessions').set({ revoked_at: sql<Date>`now()` }).where('user_id', '=', user.id).execute()
      pending = app.sessions.create(user.id, user.password_hash)
      await waitFor(async () => (await sql<{ n: number }>`
        select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like '%insert into sessions%' and pid <> pg_backend_pid()`.execute(app.db)).rows[0].n === 1,
      { what: 'the session insert to wait for the change' })
    })
    t.equal(await pending, null, `${change}: the login gets no session`)
    const live = await app.db.selectFrom('sessions').select('id').where('user_id', '=', user.id).where('revoked_at', 'is', null).execute()
    t.same(live, [], `${change}: no live session of the user`)
    await app.db.updateTable('users').set({ password_hash: user.password_hash, disabled_at: null }).where('id', '=', user.id).execute()
  }
  t.not(await app.sessions.create(user.id, user.password_hash), null, 'unchanged: the session is stored')
})

t.test('ADMIN_USERNAME is trimmed, must follow the username rules, and is created as an admin', async (t) => {
  const app = await build(t, { env: { ADMIN_USERNAME: '  Root  ', ADMIN_PASSWORD: 'eight ch' } })
  const row = await app.db.selectFrom('users').select(['username', 'role']).executeTakeFirstOrThrow()
  t.same(row, { username: 'Root', role: 'admin' })
  t.equal((await apiLogin(app, { username: 'root', password: 'eight ch' })).statusCode, 200, 'an 8-character ADMIN_PASSWORD still works')
  const { loadConfig } = await import('../../src/config.js')
  t.throws(() => loadConfig({ ADMIN_USERNAME: 'x'.repeat(65), ADMIN_PASSWORD: 'eight ch' }), { message: 'ADMIN_USERNAME: at most 64 characters' })
  t.throws(() => loadConfig({ ADMIN_USERNAME: 'a\u0000b', ADMIN_PASSWORD: 'eight ch' }), { message: /^ADMIN_USERNAME: printable characters only/ })
})

t.test('the first-run admin is an admin', async (t) => {
  const app = await build(t)
  t.same(await app.db.selectFrom('users').select(['username', 'role']).execute(), [{ username: 'admin', role: 'admin' }])
})

t.test('the upgrade refuses, naming them, two existing users whose names differ only in case', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const { db } = createDatabase(databaseUrl)
  t.teardown(async () => await db.destroy())
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } })
  t.equal((await migrator.migrateTo('20261127000300_run_requests')).error, undefined)
  await sql`insert into users (username, password_hash) values ('Åsa', 'x'), ('åsa', 'x')`.execute(db)
  const { error } = await migrator.migrateToLatest()
  t.match(String(error), /users: "Åsa" and "åsa" differ only in case or spaces; rename all but one before upgrading/)
  t.same((await sql<{ n: number }>`select count(*)::int as n from api_tokens`.execute(db).catch(() => ({ rows: [] }))).rows, [], 'nothing of the migration was applied')
})
