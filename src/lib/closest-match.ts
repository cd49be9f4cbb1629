/** Levenshtein distance between two strings, compared case-insensitively. */
function editDistance (a: string, b: string): number {
  const x = a.toLowerCase()
  const y = b.toLowerCase()
  let previous = Array.from({ length: y.length + 1 }, (_, j) => j)
  for (let i = 1; i <= x.length; i++) {
    const current = [i]
    for (let j = 1; j <= y.length; j++) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x[i - 1] === y[j - 1] ? 0 : 1))
    }
    previous = current
  }
  return previous[y.length]
}

/**
 * The candidate nearest to `word` (the first of equals), or undefined when there is none within
 * `maxDistance` edits: a far candidate is no suggestion but a distraction.
 */
export function closest (word: string, candidates: Iterable<string>, maxDistance = Infinity): string | undefined {
  let best: string | undefined
  let bestDistance = Infinity
  for (const candidate of candidates) {
    const distance = editDistance(word, candidate)
    if (distance < bestDistance && distance <= maxDistance) {
      best = candidate
      bestDistance = distance
    }
  }
  return best
}

/** How far a suggestion may be from what was written: a third of its length, at least 2 edits. */
export function nearEnough (word: string): number {
  return Math.max(2, Math.floor(word.length / 3))
}
