import type { FastifyRequest } from 'fastify'
import type pino from 'pino'
import { API_TOKEN_PREFIX } from '../auth/api-tokens.js'
import type { Config } from '../config.js'

/** Paths and headers whose values never reach the logs. */
export const REDACT = [
  'req.headers["x-service-token"]',
  'req.headers.cookie',
  'req.headers.authorization',
  'res.headers["set-cookie"]',
  // Headers logged on their own, or under any other key (`{ request: { headers } }`).
  'headers["x-service-token"]',
  'headers.cookie',
  'headers.authorization',
  'headers["set-cookie"]',
  '*.headers["x-service-token"]',
  '*.headers.cookie',
  '*.headers.authorization',
  '*.headers["set-cookie"]',
  // The secret-bearing body fields (login, users, own password, tokens), wherever a line carries them.
  ...['password', 'currentPassword', 'newPassword', 'token'].flatMap((field) => [
    field,
    `*.${field}`,
    // Request bodies one level down (`{ req: { body } }`).
    `*.*.${field}`
  ])
]

/** An API token anywhere in a text: its prefix makes it recognizable (src/auth/api-tokens.ts). */
const API_TOKEN_IN_TEXT = new RegExp(`${API_TOKEN_PREFIX}[A-Za-z0-9_-]+`, 'g')

/**
 * Fastify's request serializer, with any API token in the URL redacted: one pasted where its id
 * belongs (`DELETE /api/v1/tokens/<token>`) or put in a query string would otherwise be written
 * by the request's own log line, which the path-based redaction cannot see into.
 */
function requestLine (req: FastifyRequest): Record<string, unknown> {
  return {
    method: req.method,
    // Not every `req` logged is a request (a careless log call may pass anything): never throw.
    url: typeof req.url === 'string' ? req.url.replace(API_TOKEN_IN_TEXT, `${API_TOKEN_PREFIX}[redacted]`) : undefined,
    version: req.headers?.['accept-version'],
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort
  }
}

/** The pino options of the service (level, redaction, node name): the server and the tests use them. */
export function loggerOptions (config: Config): pino.LoggerOptions {
  return { level: config.logLevel, redact: { paths: REDACT, censor: '[redacted]' }, base: { node: config.nodeId }, serializers: { req: requestLine } }
}
