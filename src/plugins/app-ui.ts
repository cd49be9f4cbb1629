import type { FastifyPluginAsync } from 'fastify'

// STUB: encapsulated (not fastify-plugin wrapped) so its CSP hook never reaches the API.
const appUi: FastifyPluginAsync = async () => {}
export default appUi
