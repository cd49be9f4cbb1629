import t from 'tap'
import { randomBytes } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import type { Kysely } from 'kysely'
import type { Database } from '../../src/db/schema.js'
import type { SessionCache } from '../../src/auth/session-cache.js'
import { createSessionService } from '../../src/auth/sessions.js'
import { TokenTagger } from '../../src/auth/token-tag.js'
import type { AuthSession } from '../../src/auth/types.js'
import { deadline } from '../helpers/timing.js'

/** A tagger that counts the tags it checks (an HMAC each). */
class CountingTagger extends TokenTagger {
  checks = 0
  override tagged (token: string): boolean {
    this.checks++
    return super.tagged(token)
  }
}

t.test('tags: issued tokens pass, made-up and altered ones do not', async (t) => {
  const tagger = new TokenTagger(randomBytes(32), null)
  const token = tagger.issue()
  t.match(token, /^[A-Za-z0-9_-]{43}$/)
  t.ok(await tagger.mayBeLive(token))
  t.notOk(await tagger.mayBeLive(randomBytes(32).toString('base64url')), 'made up')
  t.notOk(await new TokenTagger(randomBytes(32), null).mayBeLive(token), 'another key')
  const altered = (token[0] === 'A' ? 'B' : 'A') + token.slice(1)
  t.notOk(await tagger.mayBeLive(altered), 'one character changed')
})

t.test('untagged tokens: past the known untagged_until it is read again, at most once a second, whatever the flood', async (t) => {
  let until: Date | null = null
  let reads = 0
  const tagger = new TokenTagger(randomBytes(32), null, async () => { reads++; return until })
  const madeUp = (): string => randomBytes(32).toString('base64url')
  const answers = await Promise.all(Array.from({ length: 500 }, async () => await tagger.mayBeLive(madeUp())))
  t.same(answers.filter(Boolean), [], 'refused')
  t.equal(reads, 1, '500 concurrent made-up tokens: one read')
  let passed = 0
  for (let i = 0; i < 500; i++) if (await tagger.mayBeLive(madeUp())) passed++
  t.equal(passed, 0)
  t.equal(reads, 1, '500 more in a row: none more within the second')
  // An earlier-version node issues a session: untagged_until moves on; read again a second later.
  until = new Date(Date.now() + 60_000)
  const accepted = await (async () => {
    const end = performance.now() + deadline(3000)
    while (performance.now() < end) {
      if (await tagger.mayBeLive(madeUp())) return performance.now()
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    return undefined
  })()
  t.ok(accepted !== undefined, 'untagged tokens are looked up again once the new untagged_until is read')
  t.equal(reads, 2)
})

t.test('a token the session cache vouches for costs no tag check: the HMAC is paid on a miss only', async (t) => {
  const tagger = new CountingTagger(randomBytes(32), null)
  const session: AuthSession = { userId: '1', username: 'u', role: 'admin', kind: 'session', expiresAt: new Date(Date.now() + 60_000) }
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

t.test('while a re-read of untagged_until hangs (a frozen database), other checks do not wait for it', async (t) => {
  let answer = (_until: Date | null): void => {}
  const tagger = new TokenTagger(randomBytes(32), null, async () => await new Promise<Date | null>((resolve) => { answer = resolve }))
  const madeUp = (): string => randomBytes(32).toString('base64url')
  const first = tagger.mayBeLive(madeUp())
  let timer: NodeJS.Timeout | undefined
  const others = await Promise.race([
    Promise.all(Array.from({ length: 100 }, async () => await tagger.mayBeLive(madeUp()))),
    new Promise<'held'>((resolve) => { timer = setTimeout(() => resolve('held'), deadline(2000)) })
  ])
  clearTimeout(timer)
  t.same(others, Array(100).fill(false), '100 checks answered at once, refused, while the read is out')
  answer(null)
  t.equal(await first, false, 'the check that started the read gets its answer')
})
