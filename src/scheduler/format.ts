const UNITS: Array<[string, number]> = [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000]]

/** Milliseconds as the largest duration unit that divides them exactly: 3000 → "3s", 90000 → "90s", 1500 → "1500ms". */
export function formatDuration (ms: number): string {
  if (ms > 0) {
    for (const [unit, size] of UNITS) if (ms % size === 0) return `${ms / size}${unit}`
  }
  return `${ms}ms`
}
