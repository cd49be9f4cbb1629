import { createRequire } from 'node:module'
import helmet from '@fastify/helmet'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyPluginAsync } from 'fastify'

/** The hashes of the inline scripts and styles of the package's own page, as it ships them. */
const PAGE_HASHES = createRequire(import.meta.url)('@fastify/swagger-ui/static/csp.json') as { script: string[], style: string[] }

/**
 * The policy of every answer under /docs. Everything the page loads comes from this service (the
 * package's files, served from node_modules); its calls go to this origin only; no eval and no
 * inline script (bar those the package lists by hash); nobody may frame it (its "Execute" buttons
 * act with the token typed in).
 */
const DOCS_CSP: Record<string, string[]> = {
  'default-src': ["'none'"],
  'script-src': ["'self'", ...PAGE_HASHES.script],
  'style-src': ["'self'", ...PAGE_HASHES.style],
  // The stylesheet draws its icons as data: SVGs.
  'img-src': ["'self'", 'data:'],
  'connect-src': ["'self'"],
  'font-src': ["'self'"],
  'form-action': ["'self'"],
  'frame-ancestors': ["'none'"],
  'base-uri': ["'none'"],
  'object-src': ["'none'"]
}

/**
 * `/docs`: the OpenAPI document rendered by Swagger UI, where a person can authorize with their
 * X-Service-Token and try an operation out. Public like the document: the page holds no data,
 * and every call it makes needs the token typed into it.
 */
const routes: FastifyPluginAsync = async (fastify) => {
  // The usual browser protections (no framing, no sniffing, no referrer); the policy is the page's own.
  await fastify.register(helmet, { contentSecurityPolicy: false, strictTransportSecurity: false, frameguard: { action: 'deny' }, referrerPolicy: { policy: 'no-referrer' } })
  await fastify.register(swaggerUi, {
    routePrefix: '/docs',
    staticCSP: DOCS_CSP,
    // No badge fetched from the public validator.
    validatorUrl: false,
    theme: { title: 'reaktor-service API' },
    uiConfig: {
      // Without the top bar, whose field loads a document from any address.
      layout: 'BaseLayout',
      docExpansion: 'list',
      displayOperationId: true,
      // The token stays in the page's memory, not in localStorage.
      persistAuthorization: false,
      defaultModelsExpandDepth: 1
    }
  })
}
export default routes
