/** The relative times `reaktor polling` tables show at a terminal. */
import t from 'tap'
import { relativeTime } from '../../src/cli/commands/polling.js'

const NOW = Date.parse('2026-11-25T12:00:00.000Z')
const at = (ms: number): string => new Date(NOW + ms).toISOString()

t.test('past and future, in the largest units, two at most', async (t) => {
  t.same([
    relativeTime(at(-12_000), NOW),
    relativeTime(at(4_000), NOW),
    relativeTime(at(0), NOW),
    relativeTime(at(-59_600), NOW),
    relativeTime(at(-185_000), NOW),
    relativeTime(at(7_200_000), NOW),
    relativeTime(at(7_260_000), NOW),
    relativeTime(at(-(27 * 3_600_000 + 59_000)), NOW),
    relativeTime(at(90 * 86_400_000), NOW)
  ], ['12s ago', 'in 4s', 'in 0s', '1m ago', '3m5s ago', 'in 2h', 'in 2h1m', '1d3h ago', 'in 90d'])
})
