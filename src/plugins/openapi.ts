import fp from 'fastify-plugin'
import swagger from '@fastify/swagger'

/**
 * The OpenAPI document of `/api/v1`, built from the routes' TypeBox schemas (only tagged routes,
 * i.e. the API, are listed). Served at `GET /api/v1/openapi.json` (see routes/openapi.ts).
 */
export default fp(async (fastify) => {
  await fastify.register(swagger, {
    hideUntagged: true,
    // Shared schemas (fastify.addSchema) keep their $id as their name under components.schemas.
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => typeof json.$id === 'string' ? json.$id : `def-${i}` },
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'reaktor-service API',
        version: 'v1',
        description: 'Polling reaktor control, aktor calls and session login. Every route except auth/login needs the X-Service-Token header.'
      },
      components: {
        securitySchemes: { serviceToken: { type: 'apiKey', in: 'header', name: 'X-Service-Token' } }
      },
      security: [{ serviceToken: [] }],
      tags: [
        { name: 'polling', description: 'Start, stop and inspect polling reaktors' },
        { name: 'aktor', description: 'Call standard reaktors' },
        { name: 'auth', description: 'Session tokens' }
      ]
    }
  })
}, { name: 'openapi' })
