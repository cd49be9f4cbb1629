import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'

// STUB
const routes: FastifyPluginAsyncTypebox = async () => {}
export default routes
