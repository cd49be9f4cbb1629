import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { SESSION_COOKIE } from '../../src/auth/types.js'
import { usernameKey } from '../../src/lib/user-rules.js'
import { build, metric } from './app.js'
import type { TestContext } from './test-context.js'
import { waitFor } from './timing.js'
import { createTestDatabase } from './database.js'

export const ADMIN = { username: 'alice', password: 'correct horse battery staple' }
export const ADMIN_ENV = { ADMIN_USERNAME: ADMIN.username, ADMIN_PASSWORD: ADMIN.password }

export interface Credentials { username: string, password: string }

/** The header that carries a session token to the API (none without a token). */
export function tokenHeader (token: string | undefined): Record<string, string> {
  return token === undefined ? {} : { 'x-service-token': token }
}

/** `POST /login` as a browser form would send it. */
export async function formLogin (app: FastifyInstance, body: Credentials & { redirect?: string }, headers: Record<string, string> = {}, remoteAddress?: string): Promise<LightMyRequestResponse> {
  return await app.inject({
    method: 'POST',
    url: '/login',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    payload: new URLSearchParams(Object.entries(body).filter(([, v]) => v !== undefined)).toString(),
    remoteAddress
  })
}

/** `POST /api/v1/auth/login` (JSON). */
export async function apiLogin (app: FastifyInstance, body: Credentials, headers: Record<string, string> = {}, remoteAddress?: string): Promise<LightMyRequestResponse> {
  return await app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: body, headers, remoteAddress })
}

/** The token of a successful JSON login (fails the test otherwise). */
export async function loginToken (app: FastifyInstance, creds: Credentials = ADMIN): Promise<string> {
  const res = await apiLogin(app, creds)
  if (res.statusCode !== 200) throw new Error(`login failed: ${res.statusCode} ${res.body}`)
  return res.json().token as string
}

/** `POST /api/v1/auth/logout` with the token (if any) in X-Service-Token. */
export async function logout (app: FastifyInstance, token?: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return await app.inject({
    method: 'POST',
    url: '/api/v1/auth/logout',
    headers: { ...tokenHeader(token), ...headers }
  })
}

export function sessionCookie (res: LightMyRequestResponse): { value: string, [k: string]: unknown } | undefined {
  return res.cookies.find((c) => c.name === SESSION_COOKIE) as { value: string } | undefined
}

let users = 0

/** A user with a live session, made through the auth code (no login route); returns the session token. */
export async function sessionToken (app: FastifyInstance, username = `user${++users}-${process.pid}`): Promise<string> {
  const user = await app.db.insertInto('users')
    .values({ username, username_key: usernameKey(username), password_hash: 'not-a-usable-hash' })
    .returning('id')
    .executeTakeFirstOrThrow()
  const session = await app.sessions.create(user.id)
  if (session === null) throw new Error(`no session for the new user ${username}`)
  return session.token
}

/** `GET /api/v1/test/whoami` of an app built with `whoami: true`. */
export async function whoami (app: FastifyInstance, token?: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return await app.inject({
    method: 'GET',
    url: '/api/v1/test/whoami',
    headers: { ...tokenHeader(token), ...headers }
  })
}

/**
 * Checks `token` on an app built with `whoami: true` until a check is answered from that node's
 * session cache (the cache serves only while its listener's pings are recent, which two busy cores
 * can delay), so that only a revocation notice can end it there.
 */
export async function untilCached (app: FastifyInstance, token: string, what = 'the token'): Promise<void> {
  await waitFor(async () => {
    const hits = await metric(app, 'reaktor_session_cache_hits_total')
    if ((await whoami(app, token)).statusCode !== 200) throw new Error(`${what} is refused before it could be cached`)
    return await metric(app, 'reaktor_session_cache_hits_total') > hits
  }, { what: `${what} to be answered from the cache` })
}

/** Two nodes built with `whoami: true` and `ADMIN_ENV` on one fresh database: a change on one, seen by the other. */
export async function twoNodes (t: TestContext): Promise<[FastifyInstance, FastifyInstance]> {
  const databaseUrl = await createTestDatabase(t)
  return [await build(t, { whoami: true, env: ADMIN_ENV, databaseUrl }), await build(t, { whoami: true, env: ADMIN_ENV, databaseUrl })]
}

/** What a client's call answered: the status, the JSON body (null when empty) and the headers. */
export interface ApiAnswer { statusCode: number, body: any, headers: Record<string, unknown> }
export type ApiClient = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object) => Promise<ApiAnswer>

/** The calls of a client holding `token` (a session or an API token), sent in X-Service-Token. */
export function apiAs (app: FastifyInstance, token: string): ApiClient {
  return async (method, url, payload) => {
    // Bytes are an app package (POST /api/v1/apps), sent as npm pack writes them.
    const type: Record<string, string> = Buffer.isBuffer(payload) ? { 'content-type': 'application/gzip' } : {}
    const res = await app.inject({ method, url, headers: { ...tokenHeader(token), ...type }, payload })
    return { statusCode: res.statusCode, body: res.body === '' ? null : res.json(), headers: res.headers }
  }
}

export interface CreatedApiToken { id: string, token: string, name: string, createdAt: string, expiresAt: string | null }

/** `POST /api/v1/tokens` with a login session's token (fails the test unless created). */
export async function createApiToken (app: FastifyInstance, session: string, body: object = { name: 'script' }): Promise<CreatedApiToken> {
  const res = await apiAs(app, session)('POST', '/api/v1/tokens', body)
  if (res.statusCode !== 201) throw new Error(`token not created: ${res.statusCode} ${JSON.stringify(res.body)}`)
  return res.body
}

/** An API request of a logged-in client: the status and the JSON body of the answer. */
export type ApiCall = (method: 'GET' | 'POST', url: string, payload?: unknown) => Promise<{ statusCode: number, body: any }>

/** Logs in (`ADMIN` unless told) and returns the client's calls, the token in X-Service-Token. */
export async function loggedIn (app: FastifyInstance, creds: Credentials = ADMIN): Promise<ApiCall> {
  const token = await loginToken(app, creds)
  return async (method, url, payload) => {
    const res = await app.inject({ method, url, headers: tokenHeader(token), payload: payload as object | undefined })
    return { statusCode: res.statusCode, body: res.json() }
  }
}
