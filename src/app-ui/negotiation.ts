import type { Encoding } from './prepared-file.js'

/**
 * The encoding to answer with, from Accept-Encoding and the variants at hand: the highest q-value
 * wins, brotli on a tie (it is the smaller). undefined: identity.
 */
export function chooseEncoding (acceptEncoding: string | undefined, available: { br?: unknown, gzip?: unknown }): Encoding | undefined {
  if (acceptEncoding === undefined || acceptEncoding === '') return undefined
  const q = new Map<string, number>()
  for (const part of acceptEncoding.split(',')) {
    const [token, ...params] = part.trim().toLowerCase().split(';')
    if (token === '') continue
    let weight = 1
    for (const param of params) {
      const [key, value] = param.trim().split('=')
      if (key === 'q') weight = Number(value)
    }
    q.set(token === 'x-gzip' ? 'gzip' : token, Number.isFinite(weight) ? weight : 0)
  }
  const star = q.get('*') ?? 0
  const weightOf = (encoding: Encoding): number => q.get(encoding) ?? star
  let best: Encoding | undefined
  let bestWeight = 0
  for (const encoding of ['br', 'gzip'] as const) {
    if (available[encoding] === undefined) continue
    const weight = weightOf(encoding)
    if (weight > bestWeight) {
      best = encoding
      bestWeight = weight
    }
  }
  return best
}

/** If-None-Match uses the weak comparison (RFC 9110 13.1.2). */
export function etagMatches (ifNoneMatch: string | undefined, etag: string): boolean {
  if (ifNoneMatch === undefined) return false
  const bare = etag.replace(/^W\//, '')
  return ifNoneMatch.split(',').some((candidate) => {
    const c = candidate.trim()
    return c === '*' || c.replace(/^W\//, '') === bare
  })
}
