import fp from 'fastify-plugin'
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify'
import { app as servicePlugin, serverOptions } from '../../src/app.js'
import { SESSION_COOKIE } from '../../src/auth/types.js'
import { createTestDatabase, testConfig, type TestContext } from './app.js'

export const ADMIN = { username: 'alice', password: 'correct horse battery staple' }
export const ADMIN_ENV = { ADMIN_USERNAME: ADMIN.username, ADMIN_PASSWORD: ADMIN.password }

export interface Credentials { username: string, password: string }

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

export function sessionCookie (res: LightMyRequestResponse): { value: string, [k: string]: unknown } | undefined {
  return res.cookies.find((c) => c.name === SESSION_COOKIE) as { value: string } | undefined
}

export interface ProbeOptions {
  env?: Record<string, string>
  databaseUrl?: string
}

/**
 * The whole service, as buildApp makes it, plus one route behind `fastify.authenticate`
 * (`GET /api/v1/test/whoami`), because no other authenticated route may exist yet.
 */
export async function buildWithProbe (t: TestContext, opts: ProbeOptions = {}): Promise<FastifyInstance> {
  const config = await testConfig(t, opts.env)
  const databaseUrl = opts.databaseUrl ?? await createTestDatabase(t)
  const fastify = Fastify(serverOptions(config, false))
  t.teardown(async () => await fastify.close())
  await fastify.register(fp(servicePlugin), { config, databaseUrl })
  await fastify.register(async (secured) => {
    secured.addHook('onRequest', secured.authenticate)
    secured.get('/api/v1/test/whoami', async (request) => ({ username: request.auth?.username, expiresAt: request.auth?.expiresAt.toISOString() }))
  })
  await fastify.ready()
  return fastify
}

export async function whoami (app: FastifyInstance, token?: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return await app.inject({
    method: 'GET',
    url: '/api/v1/test/whoami',
    headers: { ...(token === undefined ? {} : { 'x-service-token': token }), ...headers }
  })
}
