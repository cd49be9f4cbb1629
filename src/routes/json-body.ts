import type { FastifyInstance } from 'fastify'
import { Ajv } from 'ajv'

/**
 * Fastify's service-wide validator coerces types and its JSON parsers take text/plain too: a name
 * sent as 123 or ["a"] would be stored as "123" or "a", `"disabled": "true"` would disable a user,
 * and a body sent as text/plain would read "body must be object". Routes that change accounts, and
 * the bulk polling routes, check their bodies as sent: no coercion, nothing dropped, JSON only.
 */
export const strict = new Ajv({ allErrors: false, coerceTypes: false, removeAdditional: false, useDefaults: true, strict: false })

/** A 415 naming what to send instead of `type` (none at all, with a body). */
function notJson (fastify: FastifyInstance, type: string | undefined): Error {
  return fastify.httpErrors.unsupportedMediaType(type === undefined ? 'Send the body as application/json (it came without a content-type)' : `Send the body as application/json, not ${type.split(';')[0]}`)
}

/** In the calling plugin's scope: bodies are JSON only, validated without coercion. */
export function strictJsonBodies (fastify: FastifyInstance): void {
  fastify.setValidatorCompiler(({ schema }) => strict.compile(schema))
  // Only the JSON parser is left: any other type, or a body without one, answers 415 naming what
  // to send (Fastify's own says only "Unsupported Media Type"). The JSON parser takes JSON first.
  fastify.removeContentTypeParser('text/plain')
  fastify.addContentTypeParser('*', (request, _payload, done) => { done(notJson(fastify, request.headers['content-type']), undefined) })
}
