import createError from '@fastify/error'
import { formatDuration } from '../duration.js'
import type { RegisteredReaktor } from './types.js'

// Here rather than in errors.ts: reaktor-service/testing needs it, and errors.ts brings in the
// configuration and the whole scheduler, a slow import for an app's test.
export const AktorTimeout = createError('REAKTOR_AKTOR_TIMEOUT', 'Aktor "%s" did not answer within %s', 504)

/**
 * Why an aktor call that outlived its timeout was interrupted: the 504 it is answered with, and the
 * reason its signal is aborted with (the route and reaktor-service/testing alike).
 */
export function aktorTimeout (id: string, registered: RegisteredReaktor): Error {
  return new AktorTimeout(id, registered.registration.timeout ?? formatDuration(registered.timeoutMs))
}
