import type { Role } from '../db/schema.js'

/** The session cookie set by `POST /login` over plain http; the app-UI token helper reads it. */
export const SESSION_COOKIE = 'reaktor_session'

/**
 * Its name over https (as seen through TRUST_PROXY). Browsers accept a `__Host-` cookie only with
 * Secure, Path=/ and no Domain, from a secure page of this very host: a sibling subdomain or a
 * man in the middle on http cannot plant one.
 */
export const SECURE_SESSION_COOKIE = `__Host-${SESSION_COOKIE}`

/** The header every `/api/v1/*` call (except auth/login) carries. */
export const TOKEN_HEADER = 'x-service-token'

/** Who a request authenticated as: a login session or an API token, with its user's role. */
export type AuthSession = {
  userId: string
  username: string
  role: Role
  /** Null only for an API token created without expiry. */
  expiresAt: Date | null
} & (
  /** A login (API or browser). */
  | { kind: 'session' }
  /** An API token for scripts; `tokenId` is what DELETE /api/v1/tokens/{id} names. */
  | { kind: 'token', tokenId: string }
)

export interface SessionService {
  /**
   * Starts a new session; the token is returned once and only its SHA-256 is stored. Null when the
   * user is disabled or gone, or no longer has `passwordHash` (the hash a login checked against).
   */
  create: (userId: string, passwordHash?: string) => Promise<{ token: string, expiresAt: Date } | null>
  /** The live session of a token, or null when missing, unknown, revoked or expired. */
  verify: (token: string | undefined) => Promise<AuthSession | null>
  /**
   * What `verify` would answer from memory, at once: the session while the cache vouches for the
   * token, else undefined (not known here: ask `verify`).
   */
  cached: (token: string) => AuthSession | undefined
  /** Revokes the session of a token (no-op when unknown). */
  revoke: (token: string) => Promise<void>
  /**
   * Drops this node's cached checks of a user's sessions and tokens, after a change to the user
   * committed (revokeUserCredentials tells the other nodes): its next request is read again.
   */
  forgetUser: (userId: string) => void
}
