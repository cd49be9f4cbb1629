import fp from 'fastify-plugin'
import { StatusCache } from '../polling/status-cache.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Status and list answers in memory, as right as a read per request (src/polling/status-cache.ts). */
    statusCache: StatusCache
  }
}

/** The status cache and its LISTEN connection (one per app instance), closed with the app. */
export default fp(async (fastify) => {
  const cache = new StatusCache({ url: fastify.databaseUrl, applicationName: `reaktor-status ${fastify.config.nodeId}`.slice(0, 63), log: fastify.log })
  await cache.start()
  fastify.addHook('onClose', async () => { await cache.stop() })
  fastify.decorate('statusCache', cache)
}, { name: 'status-cache', dependencies: ['config', 'db'] })
