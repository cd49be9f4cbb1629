import { performance } from 'node:perf_hooks'
import { sql, type Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import { SESSION_REVOKED_CHANNEL, type SessionCache } from './session-cache.js'
import type { TokenTagger } from './token-tag.js'
import type { AuthSession } from './types.js'

type Db = Kysely<Database>

/**
 * What every API token starts with: a secret scanner (or a person reading a log or a diff) tells
 * an API token from anything else by it, and the service tells it from a session token.
 */
export const API_TOKEN_PREFIX = 'reaktor_pat_'

/** An API token: the prefix and a tagged value of the session-token format (see token-tag.ts). */
export const API_TOKEN_PATTERN = /^reaktor_pat_[A-Za-z0-9_-]{43}$/

/** `last_used_at` is written at most this often per token. */
export const LAST_USED_INTERVAL_MS = 60_000

/** Tokens whose last write this node remembers (beyond that the SQL guard alone holds the rate). */
const MAX_REMEMBERED = 10_000

export function isApiToken (token: string): boolean {
  return token.startsWith(API_TOKEN_PREFIX)
}

/** An API token's row as the API shows it: never its secret or its hash. */
export interface ApiTokenView {
  id: string
  name: string
  owner: string
  createdAt: Date
  lastUsedAt: Date | null
  expiresAt: Date | null
}

interface DebugLogger { debug: (obj: object, msg: string) => void }

/** The live token of a digest (not expired, of an enabled user): one query on the unique token_hash index. */
export async function findLiveToken (db: Db, digest: Buffer): Promise<AuthSession | null> {
  const row = await db.selectFrom('api_tokens')
    .innerJoin('users', 'users.id', 'api_tokens.user_id')
    .select(['api_tokens.id', 'api_tokens.user_id', 'users.username', 'users.role', 'api_tokens.expires_at'])
    .where('api_tokens.token_hash', '=', digest)
    .where((eb) => eb.or([eb('api_tokens.expires_at', 'is', null), eb('api_tokens.expires_at', '>', sql<Date>`now()`)]))
    .where('users.disabled_at', 'is', null)
    .executeTakeFirst()
  if (row === undefined) return null
  return { userId: row.user_id, username: row.username, role: row.role, kind: 'token', expiresAt: row.expires_at, tokenId: row.id }
}

/**
 * Writes `last_used_at` off the request path, at most once a minute per token: a per-node memory of
 * the last write keeps repeated checks from costing a statement each, and the statement's own guard
 * keeps several nodes (or a node that forgot) from writing it more often. A failed write is only
 * worth a debug line: the request it rode on has been answered.
 */
export class LastUsedRecorder {
  private readonly written = new Map<string, number>()
  private readonly inFlight = new Set<Promise<void>>()

  constructor (private readonly db: Db, private readonly log: DebugLogger, private readonly now: () => number = () => performance.now()) {}

  record (tokenId: string): void {
    const now = this.now()
    const last = this.written.get(tokenId)
    if (last !== undefined && now - last < LAST_USED_INTERVAL_MS) return
    // Re-inserted so that the map's order is the order of writes: the oldest go first.
    this.written.delete(tokenId)
    this.written.set(tokenId, now)
    this.forgetOld(now)
    const write = sql`
      update api_tokens set last_used_at = now()
      where id = ${tokenId} and (last_used_at is null or last_used_at < now() - interval '1 minute')
    `.execute(this.db)
      .then(() => {}, (err: unknown) => { this.log.debug({ err, tokenId }, 'could not record when an API token was last used') })
      .finally(() => this.inFlight.delete(write))
    this.inFlight.add(write)
  }

  /** Resolves when every write started so far has ended. */
  async settled (): Promise<void> {
    await Promise.all([...this.inFlight])
  }

  private forgetOld (now: number): void {
    for (const [id, at] of this.written) {
      if (this.written.size <= MAX_REMEMBERED && now - at < LAST_USED_INTERVAL_MS) break
      this.written.delete(id)
    }
  }
}

/**
 * API tokens for scripts: issued, listed and revoked here; checked by the session service
 * (sessions.ts), which caches them like sessions. Like a session, a token is stored only as the
 * SHA-256 of the whole token (tokenDigest), and revoking one announces its digest to every node.
 */
export class ApiTokenStore {
  readonly lastUsed: LastUsedRecorder

  constructor (private readonly db: Db, private readonly tagger: TokenTagger, private readonly cache: SessionCache | undefined, log: DebugLogger, now?: () => number) {
    this.lastUsed = new LastUsedRecorder(db, log, now)
  }

  /** A new token value: the prefix and a tagged random part, so that a made-up one fails without a query. */
  issue (): string {
    return API_TOKEN_PREFIX + this.tagger.issue()
  }

  /** Whether a token of the API-token form carries a valid tag (API tokens were never untagged). */
  tagged (token: string): boolean {
    return this.tagger.tagged(token.slice(API_TOKEN_PREFIX.length))
  }

  /** The live token of a digest (findLiveToken), in this store's database. */
  async find (digest: Buffer): Promise<AuthSession | null> {
    return await findLiveToken(this.db, digest)
  }

  /**
   * Stores a token's digest for user `userId` (named `owner`), in the caller's transaction, while
   * the login session `sessionDigest` that asks for it is live; null (nothing stored) otherwise.
   * The user's row is locked FOR SHARE first: a disable, delete or password change holds it while
   * it ends the user's credentials, so it either commits before (the session is found revoked, or
   * the user disabled) or waits for this insert and then deletes the token with the others: no
   * token outlives the change that ended the session which made it. The expiry is computed by
   * PostgreSQL, whose clock findLiveToken compares against.
   */
  async insert (db: Db, { userId, owner, sessionDigest, name, digest, expiresInMs }: { userId: string, owner: string, sessionDigest: Buffer, name: string, digest: Buffer, expiresInMs: number | null }): Promise<ApiTokenView | null> {
    const user = await db.selectFrom('users').select('id').where('id', '=', userId).where('disabled_at', 'is', null).forShare().executeTakeFirst()
    if (user === undefined) return null
    // A statement of its own: it reads what committed while the lock above was waited for.
    const { rows } = await sql<{ id: string, name: string, created_at: Date, last_used_at: Date | null, expires_at: Date | null }>`
      insert into api_tokens (user_id, name, token_hash, expires_at)
      select ${userId}, ${name}, ${digest}, ${expiresInMs === null ? null : sql`now() + make_interval(secs => ${expiresInMs / 1000})`}
      where exists (select 1 from sessions where token_hash = ${sessionDigest} and user_id = ${userId} and revoked_at is null and expires_at > now())
      returning id, name, created_at, last_used_at, expires_at`.execute(db)
    const row = rows[0]
    if (row === undefined) return null
    return { id: row.id, name: row.name, owner, createdAt: row.created_at, lastUsedAt: row.last_used_at, expiresAt: row.expires_at }
  }

  /** The tokens of one user, or (`ownerId` null) of everyone, oldest first. */
  async list (ownerId: string | null): Promise<ApiTokenView[]> {
    let query = this.db.selectFrom('api_tokens')
      .innerJoin('users', 'users.id', 'api_tokens.user_id')
      .select(['api_tokens.id', 'api_tokens.name', 'users.username', 'api_tokens.created_at', 'api_tokens.last_used_at', 'api_tokens.expires_at'])
      .orderBy('api_tokens.created_at').orderBy('api_tokens.id')
    if (ownerId !== null) query = query.where('api_tokens.user_id', '=', ownerId)
    const rows = await query.execute()
    return rows.map((r) => ({ id: r.id, name: r.name, owner: r.username, createdAt: r.created_at, lastUsedAt: r.last_used_at, expiresAt: r.expires_at }))
  }

  /**
   * Deletes a token (of `ownerId` only, unless null) in the caller's transaction and announces its
   * digest to every node's cache in the same statement, so the NOTIFY goes out exactly when the
   * deletion commits. Returns what was deleted, or undefined when no such token (of that owner) exists.
   */
  async remove (db: Db, id: string, ownerId: string | null): Promise<{ name: string, owner: string, digest: string } | undefined> {
    const owner = ownerId === null ? sql`true` : sql`user_id = ${ownerId}`
    const { rows } = await sql<{ name: string, owner: string, digest: string }>`
      with removed as (
        delete from api_tokens where id = ${id} and ${owner}
        returning name, user_id, encode(token_hash, 'hex') as digest
      )
      select removed.name, users.username as owner, removed.digest, pg_notify(${SESSION_REVOKED_CHANNEL}, removed.digest)
      from removed join users on users.id = removed.user_id
    `.execute(db)
    const removed = rows[0]
    return removed === undefined ? undefined : { name: removed.name, owner: removed.owner, digest: removed.digest }
  }

  /** Drops a revoked token from this node's cache at once (the other nodes hear the NOTIFY). */
  forget (digest: string): void {
    this.cache?.revoke(digest)
  }
}
