import t from 'tap'
import { DurationError, isDuration, parseDuration } from '../../src/lib/duration.js'

t.test('an integer followed by a unit parses to milliseconds', async (t) => {
  const cases: Array<[string, number]> = [
    ['30ms', 30], ['0ms', 0], ['5s', 5000], ['2m', 120_000], ['1h', 3_600_000], ['1d', 86_400_000],
    ['8h', 28_800_000], ['3000ms', 3000], ['007s', 7000]
  ]
  for (const [value, ms] of cases) t.equal(parseDuration(value), ms, value)
})

t.test('anything else is a DurationError naming the value', async (t) => {
  const bad: unknown[] = [
    '5 parsecs', '1.5s', '-1s', '10', 's', '', ' 5s', '5s ', '5 s', '5S', '5sec', '5min', '1e3ms', '+5s', '0x10s', '5s5s',
    '99999999999999999999d'
  ]
  for (const value of bad) {
    t.throws(() => parseDuration(value), DurationError, JSON.stringify(value))
    t.throws(() => parseDuration(value), { message: new RegExp(`invalid duration ${escape(JSON.stringify(value))}`) }, `${JSON.stringify(value)} is named`)
    t.equal(isDuration(value), false, `isDuration(${JSON.stringify(value)})`)
  }
})

t.test('non-strings are rejected, never coerced', async (t) => {
  for (const value of [5000, 0, null, undefined, true, {}, ['5s'], { toString: () => '5s' }]) {
    t.throws(() => parseDuration(value), DurationError, String(JSON.stringify(value)))
    t.equal(isDuration(value), false)
  }
})

t.test('the message says what is expected', async (t) => {
  t.throws(() => parseDuration('5 parsecs'), { message: /expected an integer followed by ms, s, m, h or d/ })
})

function escape (text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}
