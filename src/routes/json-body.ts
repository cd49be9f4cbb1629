import type { FastifyInstance, FastifyRequest } from 'fastify'
import { Ajv } from 'ajv'

/**
 * Fastify's service-wide validator coerces types and its JSON parsers take text/plain too: a name
 * sent as 123 or ["a"] would be stored as "123" or "a", `"disabled": "true"` would disable a user,
 * and a body sent as text/plain would read "body must be object". Routes that change accounts check
 * their bodies as sent: no coercion, nothing dropped, JSON only.
 */
const strict = new Ajv({ allErrors: false, coerceTypes: false, removeAdditional: false, useDefaults: true, strict: false })

const JSON_TYPE = /^application\/json\s*(;|$)/i

/** A 415 naming what to send instead of `type` (none at all, with a body). */
function notJson (fastify: FastifyInstance, type: string | undefined): Error {
  return fastify.httpErrors.unsupportedMediaType(type === undefined ? 'Send the body as application/json (it came without a content-type)' : `Send the body as application/json, not ${type.split(';')[0]}`)
}

/** A 415 for a body that is not application/json (none at all is the schema's to judge). */
export function requireJson (fastify: FastifyInstance, request: FastifyRequest): void {
  const type = request.headers['content-type']
  if (type !== undefined && !JSON_TYPE.test(type)) throw notJson(fastify, type)
}

/** In the calling plugin's scope: bodies are JSON only, validated without coercion. */
export function strictJsonBodies (fastify: FastifyInstance): void {
  fastify.setValidatorCompiler(({ schema }) => strict.compile(schema))
  // Only the JSON parser is left: any other type, or a body without one, answers 415 naming what
  // to send (Fastify's own says only "Unsupported Media Type"). The JSON parser takes JSON first.
  fastify.removeContentTypeParser('text/plain')
  fastify.addContentTypeParser('*', (request, _payload, done) => { done(notJson(fastify, request.headers['content-type']), undefined) })
}
