import t from 'tap'
import { randomBytes } from 'node:crypto'
import type { Kysely } from 'kysely'
import type { Database } from '../../src/db/schema.js'
import type { SessionCache } from '../../src/auth/session-cache.js'
import { createSessionService } from '../../src/auth/sessions.js'
import { TokenTagger } from '../../src/auth/token-tag.js'
import type { AuthSession } from '../../src/auth/types.js'

/** A tagger that counts the tags it checks (an HMAC each). */
class CountingTagger extends TokenTagger {
  checks = 0
  override mayBeLive (token: string): boolean {
    this.checks++
    return super.mayBeLive(token)
  }
}

t.test('tags: issued tokens pass, made-up and altered ones do not', async (t) => {
  const tagger = new TokenTagger(randomBytes(32), null)
  const token = tagger.issue()
  t.match(token, /^[A-Za-z0-9_-]{43}$/)
  t.ok(tagger.mayBeLive(token))
  t.notOk(tagger.mayBeLive(randomBytes(32).toString('base64url')), 'made up')
  t.notOk(new TokenTagger(randomBytes(32), null).mayBeLive(token), 'another key')
  const altered = (token[0] === 'A' ? 'B' : 'A') + token.slice(1)
  t.notOk(tagger.mayBeLive(altered), 'one character changed')
})

t.test('a token the session cache vouches for costs no tag check: the HMAC is paid on a miss only', async (t) => {
  const tagger = new CountingTagger(randomBytes(32), null)
  const session: AuthSession = { userId: '1', username: 'u', expiresAt: new Date(Date.now() + 60_000) }
  const token = tagger.issue()
  const cache = { generation: 0, get: (tok: string) => tok === token ? session : undefined, set: () => {}, revoke: () => {} } as unknown as SessionCache
  const db = {} as Kysely<Database>
  const sessions = createSessionService(db, 60_000, tagger, cache)
  for (let i = 0; i < 100; i++) t.equal(await sessions.verify(token), session)
  t.equal(tagger.checks, 0, 'no tag computed for the 100 cached checks')
  // A made-up token still stops at the tag, without a query (the db above has none to offer).
  t.equal(await sessions.verify(randomBytes(32).toString('base64url')), null)
  t.equal(tagger.checks, 1)
})
