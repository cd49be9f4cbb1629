import createError from '@fastify/error'

/**
 * The service's error codes, each with its HTTP status. Throw these (or @fastify/sensible's
 * httpErrors) from routes; the one error handler turns them into `{statusCode, error, message}`.
 */
export const Errors = {
  Unauthorized: createError('REAKTOR_UNAUTHORIZED', 'Missing, invalid or expired session token', 401),
  InvalidCredentials: createError('REAKTOR_INVALID_CREDENTIALS', 'Invalid username or password', 401),
  LoginRateLimited: createError('REAKTOR_LOGIN_RATE_LIMITED', 'Too many login attempts; retry in %s seconds', 429),
  CrossSiteLogin: createError('REAKTOR_CROSS_SITE_LOGIN', 'Cross-site login request rejected', 403),
  ReaktorNotFound: createError('REAKTOR_NOT_FOUND', 'Polling reaktor "%s" is not registered', 404),
  AktorNotFound: createError('REAKTOR_AKTOR_NOT_FOUND', 'Aktor "%s" is not registered', 404),
  AktorTimeout: createError('REAKTOR_AKTOR_TIMEOUT', 'Aktor "%s" did not answer within %s', 504),
  NotFound: createError('REAKTOR_NOT_FOUND_ROUTE', 'Route %s %s not found', 404)
} as const
