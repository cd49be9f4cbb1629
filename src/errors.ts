import createError from '@fastify/error'

import { AktorTimeout } from './apps/invoke.js'
import { ActiveVersionDelete, PackageVersionExists, UnknownApp, UnknownAppVersion } from './apps/package-store.js'
import { Forbidden, LastAdmin, Unauthorized, UsernameTaken, UserNotFound } from './auth/errors.js'
import { UnknownReaktorError } from './scheduler/index.js'

/**
 * Every error of the service, in one catalogue. The one error handler turns whatever reaches it
 * into `{statusCode, error, message}`; a 5xx body shows the message only for the HTTP errors below
 * (written to be shown), never an internal one.
 *
 * Class names appear in stored `lastError` texts and logs: they never change.
 */

// ---------------------------------------------------------------- HTTP answers
// Thrown by routes and hooks, and by the domains that define their own (named here with their
// module). (@fastify/sensible's httpErrors serve too, for 4xx answers: a 5xx of theirs shows only
// the generic text.)
export const Errors = {
  // src/auth/errors.ts, as are Forbidden, UserNotFound, UsernameTaken and LastAdmin.
  Unauthorized,
  InvalidCredentials: createError('REAKTOR_INVALID_CREDENTIALS', 'Invalid username or password', 401),
  LoginRateLimited: createError('REAKTOR_LOGIN_RATE_LIMITED', 'Too many login attempts; retry in %s seconds', 429),
  Forbidden,
  CrossSiteLogin: createError('REAKTOR_CROSS_SITE_LOGIN', 'Cross-site login request rejected', 403),
  CrossSiteLogout: createError('REAKTOR_CROSS_SITE_LOGOUT', 'Cross-site logout request rejected', 403),
  AktorNotFound: createError('REAKTOR_AKTOR_NOT_FOUND', 'Aktor "%s" is not registered', 404),
  // src/apps/invoke.ts.
  AktorTimeout,
  NotFound: createError('REAKTOR_NOT_FOUND_ROUTE', 'Route %s %s not found', 404),
  // Whatever a request needed from the database failed for want of a database (src/db/unavailable.ts).
  DatabaseUnavailable: createError('REAKTOR_DATABASE_UNAVAILABLE', 'The database is unavailable; retry shortly', 503),
  HostNotAllowed: createError('REAKTOR_HOST_NOT_ALLOWED', 'This service does not answer to Host %s', 421),
  // An operator asking for another user's token gets this too: whether it exists is not revealed.
  ApiTokenNotFound: createError('REAKTOR_API_TOKEN_NOT_FOUND', 'No API token of this id', 404),
  ApiTokenExpiry: createError('REAKTOR_API_TOKEN_EXPIRY', 'expiresIn must be a duration from %s to %s (for example 30d or 12h); leave it out for a token that never expires', 400),
  // POST /api/v1/auth/logout ends login sessions; a script's token is revoked by its id.
  ApiTokenLogout: createError('REAKTOR_API_TOKEN_LOGOUT', 'An API token is not a login session: revoke it with DELETE /api/v1/tokens/%s', 400),
  ReaktorStopped: createError('REAKTOR_STOPPED', 'Polling reaktor "%s" is stopped: start it first (POST /api/v1/polling/%s/start)', 409),
  // Users and roles (src/auth/user-admin.ts): a username or password rule broken, named `field: rule`.
  InvalidUserInput: createError('REAKTOR_INVALID_USER_INPUT', '%s', 400),
  UserNotFound,
  UsernameTaken,
  LastAdmin,
  WrongPassword: createError('REAKTOR_WRONG_PASSWORD', 'The current password is wrong', 403),
  // Published apps (src/apps/package-store.ts): a version stored with other bytes (409), an app or
  // version not stored (404), and the deletion of the active version (409).
  PackageVersionExists,
  AppLoadedFromFolder: createError('REAKTOR_APP_LOADED_FROM_FOLDER', 'App %s is loaded from %s on this node: a published app cannot take the name of an app loaded from a folder or given in code; rename one of them', 409),
  AppWouldNotLoad: createError('REAKTOR_APP_WOULD_NOT_LOAD', 'The package would not load: %s', 422),
  UnknownApp,
  UnknownAppVersion,
  ActiveVersionDelete
} as const

/** True for the errors above: their messages are written to be shown, even in a 5xx body. */
export function isHttpError (err: unknown): boolean {
  return Object.values(Errors).some((E) => err instanceof E)
}

/** The HTTP status of a domain error that is an answer (the domain layers know nothing of HTTP). */
export function domainStatus (err: unknown): number | undefined {
  return err instanceof UnknownReaktorError ? 404 : undefined
}

// ---------------------------------------------------------------- Start-up
// REAKTOR_CONFIG: an environment variable is invalid (the service exits with one line).
export { ConfigError } from './config.js'
// REAKTOR_REGISTRATION: an app or reaktor cannot be registered (named with its app and reaktor).
export { RegistrationError } from './apps/registry.js'
// REAKTOR_DURATION: a duration string (interval, timeout, setting) that does not parse.
export { DurationError } from './lib/duration.js'

// ---------------------------------------------------------------- Polling reaktors
// REAKTOR_NOT_FOUND (404): start, stop or status of an id that no app registered.
// REAKTOR_LEGACY_NODE: a node of the earlier per-reaktor-lock version shares the database.
export { UnknownReaktorError, LegacyNodeRunning } from './scheduler/index.js'
// REAKTOR_PARTITIONS_MISMATCH: PARTITIONS differs from the count the cluster's database stores.
export { PartitionCountMismatch } from './scheduler/index.js'
// REAKTOR_LOCK_CONNECTION_LOST: the scheduler's lock connection is gone (the node fences itself).
// REAKTOR_LOCK_REFUSED: PostgreSQL refused an advisory lock (shared lock table full).
export { LockConnectionLost, LockRefused } from './scheduler/index.js'
// REAKTOR_RUN_TIMEOUT, REAKTOR_RUN_STOPPED: why a run's signal aborted (stored as its lastError).
export { RunTimeoutError, RunStoppedError } from './scheduler/index.js'

// ---------------------------------------------------------------- Aktors
// REAKTOR_MISSING_SETTING: an aktor read a setting its app does not declare.
export { MissingSettingError } from './sdk/combinators.js'
// REAKTOR_CLIENT_CLOSED: the HTTP client went away before the aktor answered (the route answers 499).
export { ClientClosed } from './apps/invoke.js'
