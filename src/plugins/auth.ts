import fp from 'fastify-plugin'
import type { FastifyReply } from 'fastify'
import type { AuthSession, SessionService } from '../auth/types.js'

declare module 'fastify' {
  interface FastifyInstance {
    sessions: SessionService
    /** onRequest hook: 401 unless X-Service-Token names a live session; sets request.auth. */
    authenticate: (request: FastifyRequest, reply: FastifyReply) => Promise<void>
  }
  interface FastifyRequest {
    auth: AuthSession | null
  }
}

// STUB: users, sessions, cookie, rate limit and admin bootstrap go here.
export default fp(async (fastify) => {
  fastify.decorateRequest('auth', null)
  fastify.decorate('sessions', {
    create: async () => { throw new Error('not implemented') },
    verify: async () => null,
    revoke: async () => {}
  })
  fastify.decorate('authenticate', async () => { throw fastify.httpErrors.unauthorized() })
}, { name: 'auth', dependencies: ['config', 'db'] })
