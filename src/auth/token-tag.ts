import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'

const RANDOM_BYTES = 24
const TAG_BYTES = 8

/**
 * Session tokens are 24 random bytes followed by an 8-byte HMAC-SHA256 tag of them under a key all
 * nodes read from the database (`session_token_key`): 32 bytes, 43 base64url characters as before.
 * A made-up token fails the tag and is refused without a query, so a flood of them never reaches
 * PostgreSQL (one in 2^64 passes and costs the one lookup every token used to cost).
 *
 * Why a tag rather than a cache of unknown tokens: a flood brings a new token each time, so a
 * negative cache keyed by token never hits; and a node that kept the set of live tokens would have
 * to learn of a login on another node before that login's client can present its token here, which
 * a notification cannot promise. The tag needs no state and no message: the key is the same on
 * every node, so a token issued a moment ago anywhere passes at once.
 *
 * The key is no credential (a token must still name a live session, found by its SHA-256); whoever
 * reads it from the database can only make up tokens that cost a lookup again.
 */
export class TokenTagger {
  constructor (private readonly key: Buffer, private readonly untaggedUntil: Date | null) {}

  /** A new session token: random bytes and their tag, base64url. */
  issue (): string {
    const random = randomBytes(RANDOM_BYTES)
    return Buffer.concat([random, this.tag(random)]).toString('base64url')
  }

  /**
   * Whether a token of the right format may name a live session: its tag is valid, or sessions of
   * the untagged format (issued before tags) may still be live.
   */
  mayBeLive (token: string): boolean {
    const bytes = Buffer.from(token, 'base64url')
    if (bytes.length === RANDOM_BYTES + TAG_BYTES && timingSafeEqual(bytes.subarray(RANDOM_BYTES), this.tag(bytes.subarray(0, RANDOM_BYTES)))) return true
    return this.untaggedUntil !== null && Date.now() < this.untaggedUntil.getTime()
  }

  private tag (random: Buffer): Buffer {
    return createHmac('sha256', this.key).update(random).digest().subarray(0, TAG_BYTES)
  }
}

/** The cluster's tagger, from the key the migration stored. */
export async function loadTokenTagger (db: Kysely<Database>): Promise<TokenTagger> {
  const row = await db.selectFrom('session_token_key').select(['key', 'untagged_until']).executeTakeFirstOrThrow()
  return new TokenTagger(row.key, row.untagged_until)
}
