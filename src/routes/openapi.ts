import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'

/** `GET /api/v1/openapi.json`: public (no token), and not listed in itself. */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  fastify.get('/openapi.json', { schema: { hide: true } }, async () => fastify.swagger())
}
export default routes
