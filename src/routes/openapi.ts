import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'

/** `GET /api/v1/openapi.json` (behind the token like the rest of /api/v1). */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  fastify.get('/openapi.json', { schema: { hide: true } }, async () => fastify.swagger())
}
export default routes
