import fp from 'fastify-plugin'
import type { FastifyError } from 'fastify'
import { STATUS_CODES } from 'node:http'
import { isDatabaseUnavailable } from '../db/unavailable.js'
import { domainStatus, Errors, isHttpError } from '../errors.js'

/**
 * The one error handler: every error body is `{statusCode, error, message}`, and a 5xx body never
 * carries the internal message (it is logged instead).
 */
export default fp(async (fastify) => {
  fastify.setErrorHandler((err: FastifyError, request, reply) => {
    // Already marked a client error: not the database's (Node's `aborted`, a body cut short by a
    // client that went away, carries ECONNRESET too, and Fastify's body parser marks it 400).
    const clientError = typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500
    if (!clientError && isDatabaseUnavailable(err)) {
      // Not a fault of the service: a warning, and an answer that tells the client to retry.
      request.log.warn({ err }, 'database unavailable')
      void reply.header('retry-after', '1')
      const unavailable = new Errors.DatabaseUnavailable()
      void reply.code(503).send({ statusCode: 503, error: 'Service Unavailable', message: unavailable.message })
      return
    }
    let statusCode = typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 600 ? err.statusCode : domainStatus(err) ?? 500
    if (err.validation !== undefined) statusCode = 400
    const error = STATUS_CODES[statusCode] ?? (statusCode === 499 ? 'Client Closed Request' : 'Error')
    if (statusCode >= 500) {
      request.log.error({ err }, 'request failed')
      // Only the catalogue's HTTP errors carry messages written to be shown.
      void reply.code(statusCode).send({ statusCode, error, message: isHttpError(err) ? err.message : error })
      return
    }
    if (statusCode === 401) void reply.header('cache-control', 'no-store')
    void reply.code(statusCode).send({ statusCode, error, message: err.message })
  })

  fastify.setNotFoundHandler((request, reply) => {
    const err = new Errors.NotFound(request.method, request.url.split('?')[0])
    void reply.code(404).send({ statusCode: 404, error: 'Not Found', message: err.message })
  })
}, { name: 'error-handler' })

