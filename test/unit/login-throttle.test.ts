import t from 'tap'
import { LoginThrottle } from '../../src/auth/login-throttle.js'

t.test('failure windows end: a minute for the pair and the address, 15 minutes for the username', async (t) => {
  let now = 1_000_000
  const throttle = new LoginThrottle({ limit: 2, now: () => now })
  for (let i = 0; i < 2; i++) t.equal(throttle.begin('alice', 'a1').retryAfterSeconds, 0)
  const refused = throttle.begin('Alice ', 'a1')
  t.same(refused.limitedBy, ['username and address'], 'case and spaces do not make a new username')
  t.equal(refused.retryAfterSeconds, 60)
  now += 30_000
  t.equal(throttle.begin('alice', 'a1').retryAfterSeconds, 30, 'Retry-After counts down')
  now += 30_000
  t.equal(throttle.begin('alice', 'a1').retryAfterSeconds, 0, 'a minute later the pair may try again')

  // 20 failures (10 × limit) from other addresses: the account is under attack for 15 minutes.
  for (let i = 0; i < 17; i++) t.equal(throttle.begin('alice', `b${i}`).retryAfterSeconds, 0)
  t.equal(throttle.begin('alice', 'b0').retryAfterSeconds, 60, 'one failure a minute per address now')
  t.equal(throttle.begin('alice', 'fresh').retryAfterSeconds, 0, 'a clean address is let through')
  now += 15 * 60_000
  t.equal(throttle.begin('alice', 'b0').retryAfterSeconds, 0)
  t.equal(throttle.begin('alice', 'b0').retryAfterSeconds, 0, 'the full budget is back')
})

t.test('a success takes its attempt back; the counters hold at most maxKeys keys', async (t) => {
  const throttle = new LoginThrottle({ limit: 1, maxKeys: 100 })
  for (let i = 0; i < 50; i++) {
    t.equal(throttle.begin('bob', 'a').retryAfterSeconds, 0)
    throttle.succeeded('bob', 'a')
  }
  t.equal(throttle.begin('bob', 'a').retryAfterSeconds, 0)
  t.not(throttle.begin('bob', 'a').retryAfterSeconds, 0, 'the next failure is the one counted')
  // Spraying 1000 usernames from 1000 addresses keeps at most maxKeys keys per counter.
  for (let i = 0; i < 1000; i++) throttle.begin(`u${i}`, `addr${i}`)
  t.equal(throttle.size, 100)
})

t.test('an IPv6 client is its /64: rotating the low 64 bits of its address does not buy new budgets', async (t) => {
  const throttle = new LoginThrottle({ limit: 2 })
  // One host, one /64 (what a single ISP customer or cloud VM is given), a fresh address per guess.
  const answers = Array.from({ length: 10 }, (_, i) => throttle.begin(`user${i}`, `2001:db8:0:1:${(i + 1).toString(16)}::${i + 7}`).retryAfterSeconds)
  t.same(answers.map((s) => s === 0), [true, true, true, true, true, true, false, false, false, false], 'the per-address budget (3 × limit) is shared across the /64')
  t.same(throttle.begin('user0', '2001:db8:0:1::9').limitedBy, ['address'])
  // Written out in full, compressed differently, or IPv4-mapped: the same client.
  const pair = new LoginThrottle({ limit: 2 })
  for (const address of ['2001:0db8:0000:0002:0000:0000:0000:0001', '2001:DB8:0:2::ab']) t.equal(pair.begin('carol', address).retryAfterSeconds, 0)
  t.same(pair.begin('carol', '2001:db8::2:1:2:3:4').limitedBy, ['username and address'], 'the pair budget is shared across the /64 too')
  t.equal(pair.begin('carol', '2001:db8:0:3::1').retryAfterSeconds, 0, 'another /64 is another client')
  const mapped = new LoginThrottle({ limit: 1 })
  t.equal(mapped.begin('dave', '::ffff:192.0.2.1').retryAfterSeconds, 0)
  t.not(mapped.begin('dave', '192.0.2.1').retryAfterSeconds, 0, 'an IPv4-mapped address is its IPv4 address')
  t.equal(mapped.begin('dave', '192.0.2.2').retryAfterSeconds, 0, 'IPv4 addresses stay apart')
  // A success takes back the attempt of the same client, whichever of its addresses it used.
  const back = new LoginThrottle({ limit: 1 })
  t.equal(back.begin('erin', '2001:db8:0:4::1').retryAfterSeconds, 0)
  back.succeeded('erin', '2001:db8:0:4::1')
  t.equal(back.begin('erin', '2001:db8:0:4::2').retryAfterSeconds, 0, 'the success cleared the pair')
  // A client gone before its attempt was counted has no address any more: counted, not a crash.
  t.equal(back.begin('erin', undefined).retryAfterSeconds, 0)
})

t.test('an attempt the database could not answer is taken back; the failures before it stay counted', async (t) => {
  const throttle = new LoginThrottle({ limit: 2 })
  t.equal(throttle.begin('frank', '192.0.2.1').retryAfterSeconds, 0, 'a failure')
  for (let i = 0; i < 5; i++) {
    t.equal(throttle.begin('frank', '192.0.2.1').retryAfterSeconds, 0, `unanswered attempt ${i + 1}`)
    throttle.unanswered('frank', '192.0.2.1')
  }
  t.equal(throttle.begin('frank', '192.0.2.1').retryAfterSeconds, 0, 'the second failure')
  t.not(throttle.begin('frank', '192.0.2.1').retryAfterSeconds, 0, 'then the limit: the first failure was not forgotten')
})
