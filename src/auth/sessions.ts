import { createHash } from 'node:crypto'
import { sql, type Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import { SESSION_REVOKED_CHANNEL, USER_PAYLOAD_PREFIX, type SessionCache } from './session-cache.js'
import { API_TOKEN_PATTERN, isApiToken, type ApiTokenStore } from './api-tokens.js'
import type { TokenTagger } from './token-tag.js'
import type { AuthSession, SessionService } from './types.js'

type Db = Kysely<Database>

/** 32 bytes (random part and tag, see token-tag.ts), base64url without padding: 43 characters of [A-Za-z0-9_-]. */
const TOKEN_FORMAT = /^[A-Za-z0-9_-]{43}$/

/** Tokens remembered as dead (see createSessionService). */
const MAX_DEAD_TOKENS = 10_000

/**
 * What the database stores instead of the token. A plain SHA-256 is enough (no salt, no slow hash):
 * the token has 256 bits of entropy, so nothing can be guessed from the digest, and the lookup by
 * digest stays a single indexed equality.
 */
export function tokenDigest (token: string): Buffer {
  return createHash('sha256').update(token).digest()
}

/**
 * Stores a new session (of a tagged token) and returns its expiry, or null when the user is
 * disabled or gone, or (with `passwordHash`) no longer has the password that was checked. The
 * user's row is read FOR SHARE in the same statement: a disable or password change either commits
 * before it (no session) or waits for it and then ends the session it made, so a login racing one
 * leaves no live session behind. The expiry is computed by PostgreSQL, the same clock
 * `findLiveSession` compares against, so node clocks cannot disagree about it.
 */
export async function insertSession (db: Db, userId: string, digest: Buffer, ttlMs: number, passwordHash?: string): Promise<Date | null> {
  // Tagged: only the sessions of earlier-version nodes move untagged_until (see the migrations).
  const result = await sql<{ expires_at: Date }>`
    insert into sessions (user_id, token_hash, tagged, expires_at)
    select id, ${digest}, true, now() + make_interval(secs => ${ttlMs / 1000})
    from users
    where id = ${userId} and disabled_at is null ${passwordHash === undefined ? sql`` : sql`and password_hash = ${passwordHash}`}
    for share
    returning expires_at`.execute(db)
  return result.rows[0]?.expires_at ?? null
}

/** The live session of a digest (of an enabled user): one query on the unique token_hash index. */
export async function findLiveSession (db: Db, digest: Buffer): Promise<AuthSession | null> {
  const row = await db.selectFrom('sessions')
    .innerJoin('users', 'users.id', 'sessions.user_id')
    .select(['sessions.user_id', 'users.username', 'users.role', 'sessions.expires_at'])
    .where('sessions.token_hash', '=', digest)
    .where('sessions.revoked_at', 'is', null)
    .where('sessions.expires_at', '>', sql<Date>`now()`)
    .where('users.disabled_at', 'is', null)
    .executeTakeFirst()
  return row === undefined ? null : { userId: row.user_id, username: row.username, role: row.role, kind: 'session', expiresAt: row.expires_at }
}

/**
 * Ends every session and API token of a user (disable, delete, password change, role change
 * included: a cached role must not outlive the change) and announces it to every node's session
 * cache. Run it inside the transaction of the change: the NOTIFY is delivered when that commits.
 * `keepCredentials`: only the cached entries are dropped (a role change: sessions and tokens stay,
 * and are read again with the new role).
 */
export async function revokeUserCredentials (db: Db, userId: string, { keepCredentials = false }: { keepCredentials?: boolean } = {}): Promise<void> {
  if (keepCredentials) {
    await sql`select pg_notify(${SESSION_REVOKED_CHANNEL}, ${USER_PAYLOAD_PREFIX + userId})`.execute(db)
    return
  }
  // Data-modifying CTEs run to completion whether or not the outer select reads them.
  await sql`
    with ended_sessions as (
      update sessions set revoked_at = now() where user_id = ${userId} and revoked_at is null
    ), ended_tokens as (
      delete from api_tokens where user_id = ${userId}
    )
    select pg_notify(${SESSION_REVOKED_CHANNEL}, ${USER_PAYLOAD_PREFIX + userId})
  `.execute(db)
}

/**
 * Revokes a session and announces it to every node's session cache. The NOTIFY is part of the
 * same statement, so it is delivered exactly when the revocation commits, never before.
 */
export async function revokeSession (db: Db, digest: Buffer): Promise<void> {
  await sql`
    with revoked as (
      update sessions set revoked_at = now()
      where token_hash = ${digest} and revoked_at is null
      returning token_hash
    )
    select pg_notify(${SESSION_REVOKED_CHANNEL}, encode(token_hash, 'hex')) from revoked
  `.execute(db)
}

/** Removes sessions that can never be used again (uses the expires_at index). */
export async function deleteExpiredSessions (db: Db): Promise<void> {
  await db.deleteFrom('sessions').where('expires_at', '<=', sql<Date>`now()`).execute()
}

/**
 * The SessionService of src/auth/types.ts on top of the sessions table, and of the api_tokens
 * table for tokens with the API-token prefix (see api-tokens.ts). With a cache, a token verified
 * once is not looked up again while the cache can vouch for it (see session-cache.ts); both kinds
 * share it, so a revocation NOTIFY drops either within the same second.
 *
 * A token whose lookup found no live session is remembered as dead (a bounded set): a token is
 * handed out only after its session has committed, and a revoked or expired session never comes
 * back, so that answer holds forever and a client replaying an old token costs one query. (An API
 * token is never brought back either: revoking one deletes its row.)
 */
export function createSessionService (db: Db, ttlMs: number, tagger: TokenTagger, cache?: SessionCache, apiTokens?: ApiTokenStore): SessionService {
  const dead = new Set<string>()
  const wellFormed = (token: string | undefined): token is string => typeof token === 'string' && TOKEN_FORMAT.test(token)
  const used = (session: AuthSession): AuthSession => {
    if (session.kind === 'token') apiTokens?.lastUsed.record(session.tokenId)
    return session
  }
  /** Whether a token has the form of one of ours (an API token's, with the store; else a session's). */
  const ours = (token: string): boolean => apiTokens !== undefined && isApiToken(token) ? API_TOKEN_PATTERN.test(token) : TOKEN_FORMAT.test(token)
  // Only a token read from the database is cached: one found there needs no tag check (an HMAC,
  // a few microseconds on every request otherwise).
  const fromCache = (token: string): AuthSession | undefined => {
    const cached = cache?.get(token)
    return cached === undefined ? undefined : used(cached)
  }
  return {
    async create (userId, passwordHash) {
      // Housekeeping rides on logins: rare enough to be cheap, frequent enough to keep the table small.
      await deleteExpiredSessions(db)
      const token = tagger.issue()
      const expiresAt = await insertSession(db, userId, tokenDigest(token), ttlMs, passwordHash)
      return expiresAt === null ? null : { token, expiresAt }
    },
    async verify (token) {
      if (typeof token !== 'string' || !ours(token)) return null
      const cached = fromCache(token)
      if (cached !== undefined) return cached
      const api = apiTokens !== undefined && isApiToken(token)
      // Anything that is not one of our tokens is rejected without a query.
      if (dead.has(token) || !(api ? apiTokens.tagged(token) : await tagger.mayBeLive(token))) return null
      const generation = cache?.generation ?? 0
      const digest = tokenDigest(token)
      const session = api ? await apiTokens.find(digest) : await findLiveSession(db, digest)
      if (session !== null) {
        cache?.set(token, digest.toString('hex'), session, generation)
        return used(session)
      }
      if (dead.size >= MAX_DEAD_TOKENS) dead.delete(dead.values().next().value as string)
      dead.add(token)
      return null
    },
    cached (token) {
      return ours(token) ? fromCache(token) : undefined
    },
    async revoke (token) {
      // Only ever called with a token authenticate() has just accepted.
      if (!wellFormed(token)) return
      const digest = tokenDigest(token)
      await revokeSession(db, digest)
      // This node at once; the others when the notification reaches them.
      cache?.revoke(digest.toString('hex'))
    },
    forgetUser (userId) {
      cache?.revoke(USER_PAYLOAD_PREFIX + userId)
    }
  }
}
