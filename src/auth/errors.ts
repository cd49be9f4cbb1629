import createError from '@fastify/error'

/**
 * The answers of authentication and user administration that this domain throws itself (the
 * checks it makes under its lock: src/auth/user-admin.ts). Defined here so that the domain needs
 * nothing above it; src/errors.ts lists them in the one catalogue, where the HTTP layer uses them.
 */
export const Unauthorized = createError('REAKTOR_UNAUTHORIZED', 'Missing, invalid or expired session token', 401)
// A role check failed (src/plugins/auth.ts requireAdmin); the message names the role needed.
export const Forbidden = createError('REAKTOR_FORBIDDEN', '%s', 403)
export const UserNotFound = createError('REAKTOR_USER_NOT_FOUND', 'User "%s" does not exist', 404)
export const UsernameTaken = createError('REAKTOR_USERNAME_TAKEN', 'Username "%s" is taken (usernames are compared without regard to case)', 409)
export const LastAdmin = createError('REAKTOR_LAST_ADMIN', 'User "%s" is the last enabled admin: make another user an admin first', 409)
