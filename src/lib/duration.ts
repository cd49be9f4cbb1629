/**
 * The one duration parser of the service: polling `interval`, aktor `timeout` and `SESSION_TTL`
 * all use it, so every place accepts exactly the same strings.
 */
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const

const DURATION = /^(\d+)(ms|s|m|h|d)$/

export class DurationError extends Error {
  readonly code = 'REAKTOR_DURATION'
  constructor (public readonly value: unknown) {
    super(`invalid duration ${JSON.stringify(value)}: expected an integer followed by ms, s, m, h or d (for example 500ms, 5s, 2m, 1h, 1d)`)
    this.name = 'DurationError'
  }
}

/** Parses `"5s"` into 5000. Throws a DurationError naming the value for anything else. */
export function parseDuration (value: unknown): number {
  if (typeof value !== 'string') throw new DurationError(value)
  const match = DURATION.exec(value)
  if (match === null) throw new DurationError(value)
  const ms = Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS]
  if (!Number.isSafeInteger(ms)) throw new DurationError(value)
  return ms
}

export function isDuration (value: unknown): value is string {
  try {
    parseDuration(value)
    return true
  } catch {
    return false
  }
}

/**
 * setTimeout's ceiling (about 24.8 days): Node fires a longer delay after 1 ms, so a longer
 * timeout would abort every run (and answer every aktor call 504) at once.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1

const FORMAT_UNITS = (['d', 'h', 'm', 's'] as const).map((unit) => [unit, UNIT_MS[unit]] as const)

/** Milliseconds as the largest unit that divides them exactly: 3000 → "3s", 90000 → "90s", 1500 → "1500ms". parseDuration reads it back. */
export function formatDuration (ms: number): string {
  if (ms > 0) {
    for (const [unit, size] of FORMAT_UNITS) if (ms % size === 0) return `${ms / size}${unit}`
  }
  return `${ms}ms`
}
