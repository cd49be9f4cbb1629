import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { compileInputChecks } from '../apps/input-schema.js'
import { AktorCall, callFailure, invokeAktor, outputJson } from '../apps/invoke.js'
import { Errors } from '../errors.js'
import { AktorOutput, AktorParams } from '../schemas/aktor.js'
import { described, ErrorBody } from '../schemas/common.js'

/**
 * `POST /api/v1/aktor/{aktorName}`: runs a standard reaktor's aktor on the JSON body and answers
 * its output. Registered inside the scope that authenticates X-Service-Token.
 */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  // JSON only (no text/plain strings): applies to this scope, not to the rest of the API.
  fastify.removeContentTypeParser('text/plain')

  // Compiled at start: a broken input schema stops the start, naming its reaktor.
  const inputChecks = compileInputChecks(fastify.apps.reaktors)

  fastify.post('/aktor/:aktorName', {
    bodyLimit: fastify.config.aktorBodyLimit,
    schema: {
      tags: ['aktor'],
      operationId: 'callAktor',
      summary: 'Call a standard reaktor with a JSON input',
      params: AktorParams,
      response: {
        200: AktorOutput,
        400: described(ErrorBody, 'The body does not match the aktor\'s input schema, or the name is invalid'),
        401: ErrorBody,
        404: described(ErrorBody, 'No standard reaktor of this name is registered'),
        413: described(ErrorBody, 'The body is larger than AKTOR_BODY_LIMIT'),
        415: ErrorBody,
        500: described(ErrorBody, 'The aktor failed (the node logs why; the body carries no detail)'),
        503: ErrorBody,
        504: ErrorBody
      }
    }
  }, async (request, reply) => {
    const id = request.params.aktorName
    const registered = fastify.apps.reaktors.get(id)
    if (registered === undefined) throw new Errors.AktorNotFound(id)
    const input = request.body

    const problem = inputChecks.get(id)?.(input)
    if (problem !== undefined) throw fastify.httpErrors.badRequest(problem)

    const call = new AktorCall()
    let output: unknown
    try {
      output = await invokeAktor(registered, input, call, { reaktorId: id, runId: request.id, log: request.log, response: reply.raw })
    } catch (err) {
      const failure = callFailure(call, err)
      // The AktorTimeout is the 504 itself.
      if (failure.outcome === 'timed_out') throw failure.cause
      // A 499 (nobody is listening any more: nginx's "client closed request") or the aktor's own 4xx.
      if (failure.message !== undefined) throw fastify.httpErrors.createError(failure.statusCode, failure.message)
      // The error handler logs it and answers a generic 500: an aktor's internals never leak.
      throw Object.assign(new Error(`aktor "${id}" failed`, { cause: err }), { statusCode: 500 })
    }
    // Serialized here, so that every JSON value (a bare string too) is sent as JSON.
    return await reply.type('application/json; charset=utf-8').send(outputJson(output))
  })
}

export default routes
