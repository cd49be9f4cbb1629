import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { migrationsApplied } from '../db/migrate.js'
import { ErrorBody } from '../schemas/common.js'

const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  fastify.get('/healthz', {
    schema: { response: { 200: Type.Object({ status: Type.Literal('ok') }) } }
  }, async () => ({ status: 'ok' as const }))

  fastify.get('/readyz', {
    schema: { response: { 200: Type.Object({ status: Type.Literal('ready') }), 503: ErrorBody } }
  }, async (_request, reply) => {
    try {
      // Also the reachability check: it throws when the database is gone.
      if (!(await migrationsApplied(fastify.db))) {
        return await reply.code(503).send({ statusCode: 503, error: 'Service Unavailable', message: 'database migrations are not applied' })
      }
    } catch {
      return await reply.code(503).send({ statusCode: 503, error: 'Service Unavailable', message: 'database unreachable' })
    }
    // The pool answers again before the scheduler's lock connection has reconnected (backoff):
    // until then this node cannot run reaktors.
    if (!fastify.scheduler.connected) {
      return await reply.code(503).send({ statusCode: 503, error: 'Service Unavailable', message: 'scheduler not connected to the database' })
    }
    // Connected, but not able to own its share: a full lock table, or an earlier-version node.
    const problem = fastify.scheduler.problem
    if (problem !== undefined) {
      return await reply.code(503).send({ statusCode: 503, error: 'Service Unavailable', message: `scheduler: ${problem}` })
    }
    return { status: 'ready' as const }
  })
}
export default routes
