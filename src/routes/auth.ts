import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { writeCookies } from '../auth/session-cookie.js'
import { TOKEN_HEADER } from '../auth/types.js'
import { Errors } from '../errors.js'
import { LoginBody, LoginResult, LogoutResult, WhoAmI } from '../schemas/auth.js'
import { Answers, described, ErrorBody } from '../schemas/common.js'
import { strictJsonBodies } from './json-body.js'

/**
 * `/api/v1/auth/*`: token login for API clients, and logout. Registered outside the authenticated
 * scope so that login is reachable; logout protects itself.
 */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  strictJsonBodies(fastify)
  await writeCookies(fastify)
  fastify.post('/auth/login', {
    preHandler: fastify.limitLoginAttempts,
    schema: {
      tags: ['auth'],
      operationId: 'login',
      summary: 'Exchange a username and password for a session token',
      // The one operation without the document-wide X-Service-Token requirement.
      security: [],
      body: LoginBody,
      response: {
        200: LoginResult,
        400: ErrorBody,
        401: described(ErrorBody, 'Wrong username or password (the same answer for both)'),
        413: Answers.tooLarge,
        415: Answers.notJson,
        429: ErrorBody,
        500: ErrorBody,
        503: ErrorBody
      }
    }
  }, async (request, reply) => {
    const { username, password } = request.body
    const session = await fastify.login(request, username, password)
    if (session === null) throw new Errors.InvalidCredentials()
    const { token, expiresAt } = session
    void reply.header('cache-control', 'no-store')
    return { token, expiresAt: expiresAt.toISOString() }
  })

  fastify.post('/auth/logout', {
    onRequest: fastify.authenticate,
    schema: {
      tags: ['auth'],
      operationId: 'logout',
      summary: 'Revoke the presented session token and clear the session cookie',
      response: { 200: LogoutResult, 400: described(ErrorBody, 'Presented with an API token: revoke it with DELETE /api/v1/tokens/{id}'), 401: ErrorBody, 500: ErrorBody, 503: ErrorBody }
    }
  }, async (request, reply) => {
    // A script ending with a logout, as it would a login session, must not destroy its long-lived token by accident.
    if (request.auth?.kind === 'token') throw new Errors.ApiTokenLogout(request.auth.tokenId)
    // authenticate() accepted the header, so it is a single string.
    await fastify.sessions.revoke(request.headers[TOKEN_HEADER] as string)
    fastify.clearSessionCookie(request, reply)
    request.log.info({ userId: request.auth?.userId }, 'logged out')
    await fastify.audit(request, { action: 'auth.logout', targets: [] })
    return { message: 'Logged out; the session is revoked' }
  })

  fastify.get('/auth/me', {
    onRequest: fastify.authenticate,
    schema: {
      tags: ['auth'],
      operationId: 'whoAmI',
      summary: 'The user and role of the presented session or API token',
      response: { 200: described(WhoAmI, 'The user and role of the presented credential'), 401: ErrorBody, 500: ErrorBody, 503: ErrorBody }
    }
  }, async (request, reply) => {
    const auth = request.auth!
    void reply.header('cache-control', 'no-store')
    return {
      username: auth.username,
      role: auth.role,
      kind: auth.kind,
      tokenId: auth.kind === 'token' ? auth.tokenId : undefined,
      expiresAt: auth.expiresAt === null ? null : auth.expiresAt.toISOString()
    }
  })
}
export default routes
