import fp from 'fastify-plugin'
import swagger from '@fastify/swagger'
import { SHARED_SCHEMAS } from '../schemas/components.js'

/**
 * What the answers every route may give mean, for the responses a route does not describe itself
 * (Fastify's generator would call each of them "Default Response").
 */
const ANSWERS: Record<string, string> = {
  400: 'Invalid request: the message says which rule the input broke',
  401: 'Missing, invalid or expired session token (X-Service-Token)',
  403: 'The caller\'s role may not do this',
  404: 'Not found: the message names what',
  409: 'Conflicts with the current state: the message says how',
  413: 'The body is larger than this route accepts',
  415: 'Unsupported content type: send application/json',
  429: 'Too many attempts: the message says when to retry',
  500: 'Internal error: the body carries no detail (the node logs it)',
  503: 'The database is unavailable: retry shortly',
  504: 'The aktor did not answer within its timeout'
}

type Operations = Record<string, Record<string, { responses?: Record<string, { description?: string }> }>>

function describeAnswers (paths: Operations | undefined): void {
  for (const methods of Object.values(paths ?? {})) {
    for (const operation of Object.values(methods)) {
      for (const [code, response] of Object.entries(operation.responses ?? {})) {
        if (response.description === 'Default Response' && ANSWERS[code] !== undefined) response.description = ANSWERS[code]
      }
    }
  }
}

/**
 * The OpenAPI document of `/api/v1`, built from the routes' TypeBox schemas (only tagged routes,
 * i.e. the API, are listed). Served at `GET /api/v1/openapi.json` (see routes/openapi.ts) and
 * rendered at `/docs` (routes/docs.ts).
 */
export default fp(async (fastify) => {
  for (const schema of SHARED_SCHEMAS) fastify.addSchema(schema)
  await fastify.register(swagger, {
    hideUntagged: true,
    transformObject: (documents) => {
      if (!('openapiObject' in documents)) return documents.swaggerObject
      describeAnswers(documents.openapiObject.paths as Operations | undefined)
      return documents.openapiObject
    },
    // Shared schemas (fastify.addSchema) keep their $id as their name under components.schemas.
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => typeof json.$id === 'string' ? json.$id : `def-${i}` },
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'reaktor-service API',
        version: 'v1',
        description: 'Polling reaktor control, aktor calls, accounts and the audit log. Every operation except auth/login needs the X-Service-Token header: ' +
          'a session token from auth/login, or an API token for scripts (createApiToken). This document is public, at /api/v1/openapi.json; /docs renders it and can try the operations out.'
      },
      components: {
        securitySchemes: { serviceToken: { type: 'apiKey', in: 'header', name: 'X-Service-Token', description: 'A session token (login) or an API token (reaktor_pat_…)' } }
      },
      security: [{ serviceToken: [] }],
      tags: [
        { name: 'polling', description: 'Start, stop and inspect polling reaktors' },
        { name: 'aktor', description: 'Call standard reaktors' },
        { name: 'auth', description: 'Session tokens: login, logout, one\'s own password' },
        { name: 'users', description: 'User administration (admins) and one\'s own password' },
        { name: 'tokens', description: 'API tokens for scripts' },
        { name: 'audit', description: 'The audit log of privileged actions' },
        { name: 'apps', description: 'Publish, activate, roll back and delete reaktor app versions across the cluster' }
      ]
    }
  })
}, { name: 'openapi' })
