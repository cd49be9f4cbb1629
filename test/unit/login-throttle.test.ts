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
