import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { migrationsApplied } from '../db/migrate.js'
import { ErrorBody } from '../schemas/common.js'

/**
 * How long /readyz waits for the database. A probe must get an answer well within its own timeout
 * (commonly 1 to 2 s), even from a frozen database or a silently dropping network: the pool's own
 * bounds are longer (src/db/index.ts).
 */
export const READY_DATABASE_TIMEOUT_MS = 1500

const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  fastify.get('/healthz', {
    schema: { response: { 200: Type.Object({ status: Type.Literal('ok') }) } }
  }, async () => ({ status: 'ok' as const }))

  const unavailable = (message: string) => ({ statusCode: 503, error: 'Service Unavailable', message })

  fastify.get('/readyz', {
    schema: { response: { 200: Type.Object({ status: Type.Literal('ready') }), 503: ErrorBody } }
  }, async (_request, reply) => {
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<'late'>((resolve) => { timer = setTimeout(() => resolve('late'), READY_DATABASE_TIMEOUT_MS) })
    try {
      // Also the reachability check: it throws when the database is gone.
      const applied = await Promise.race([migrationsApplied(fastify.db), late])
      if (applied === 'late') return await reply.code(503).send(unavailable(`database did not answer within ${READY_DATABASE_TIMEOUT_MS} ms`))
      if (!applied) return await reply.code(503).send(unavailable('database migrations are not applied'))
    } catch {
      return await reply.code(503).send(unavailable('database unreachable'))
    } finally {
      clearTimeout(timer)
    }
    // The pool answers again before the scheduler's lock connection has reconnected (backoff):
    // until then this node cannot run reaktors.
    if (!fastify.scheduler.connected) return await reply.code(503).send(unavailable('scheduler not connected to the database'))
    // Connected, but not able to own its share: a full lock table, or an earlier-version node.
    const problem = fastify.scheduler.problem
    if (problem !== undefined) return await reply.code(503).send(unavailable(`scheduler: ${problem}`))
    return { status: 'ready' as const }
  })
}
export default routes
