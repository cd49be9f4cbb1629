import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'

const RANDOM_BYTES = 24
const TAG_BYTES = 8
/** How often, at most, `untagged_until` is read again while untagged tokens arrive. */
const UNTAGGED_REREAD_MS = 1000

/**
 * Session tokens are 24 random bytes followed by an 8-byte HMAC-SHA256 tag of them under a key all
 * nodes read from the database (`session_token_key`): 32 bytes, 43 base64url characters as before.
 * A made-up token fails the tag and is refused without a session lookup, so a flood of them does
 * not reach PostgreSQL (one in 2^64 passes and costs the one lookup every token used to cost); all
 * it causes is a re-read of `untagged_until`, at most one small query a second.
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
  private untaggedReadAt = -Infinity
  private rereading = false

  /**
   * `readUntaggedUntil` reads `untagged_until` again: nodes of the earlier version still running
   * during a rolling upgrade move it on with each session they issue (a trigger, see the
   * migration `untagged_sessions`). Without it the value given here is final.
   */
  constructor (private readonly key: Buffer, private untaggedUntil: Date | null, private readonly readUntaggedUntil?: () => Promise<Date | null>) {}

  /** A new session token: random bytes and their tag, base64url. */
  issue (): string {
    const random = randomBytes(RANDOM_BYTES)
    return Buffer.concat([random, this.tag(random)]).toString('base64url')
  }

  /** Whether a token of the right format carries a valid tag. */
  tagged (token: string): boolean {
    const bytes = Buffer.from(token, 'base64url')
    return bytes.length === RANDOM_BYTES + TAG_BYTES && timingSafeEqual(bytes.subarray(RANDOM_BYTES), this.tag(bytes.subarray(0, RANDOM_BYTES)))
  }

  /**
   * Whether a token of the right format may name a live session: its tag is valid, or sessions of
   * the untagged format (issued before tags, or by an earlier-version node since) may still be
   * live. Past the last known `untagged_until` that is read again, at most once a second: a flood
   * of made-up tokens costs at most one small query a second. Only the check that starts a read
   * waits for it; the others answer from what is known (a frozen database must not hold a flood's
   * requests open).
   */
  async mayBeLive (token: string): Promise<boolean> {
    if (this.tagged(token) || this.untaggedOpen()) return true
    const read = this.readUntaggedUntil
    if (read === undefined || this.rereading || performance.now() - this.untaggedReadAt < UNTAGGED_REREAD_MS) return false
    this.rereading = true
    try {
      this.untaggedUntil = await read()
    } catch {
      // The database did not answer: what was known stands.
    } finally {
      this.untaggedReadAt = performance.now()
      this.rereading = false
    }
    return this.untaggedOpen()
  }

  private untaggedOpen (): boolean {
    return this.untaggedUntil !== null && Date.now() < this.untaggedUntil.getTime()
  }

  private tag (random: Buffer): Buffer {
    return createHmac('sha256', this.key).update(random).digest().subarray(0, TAG_BYTES)
  }
}

/** The cluster's tagger, from the key the migration stored. */
export async function loadTokenTagger (db: Kysely<Database>): Promise<TokenTagger> {
  const read = async (): Promise<{ key: Buffer, untagged_until: Date | null }> =>
    await db.selectFrom('session_token_key').select(['key', 'untagged_until']).executeTakeFirstOrThrow()
  const row = await read()
  return new TokenTagger(row.key, row.untagged_until, async () => (await read()).untagged_until)
}
