/**
 * Parsing of `/app-ui/<name>@<version>/<path>` request targets. Nothing here trusts the raw URL as
 * a string to echo back: redirects are rebuilt from the parts once they are checked.
 */

export type AppUiTarget =
  /** Malformed percent-encoding or a NUL byte. */
  | { kind: 'bad' }
  /** Not an app path at all. */
  | { kind: 'none' }
  | {
    kind: 'app'
    name: string
    version: string
    /** Decoded path segments below the app root; null when the URL ends at `<name>@<version>`. */
    segments: string[] | null
    trailingSlash: boolean
    /** A segment begins with a dot at some level of decoding: always refused. */
    dotSegment: boolean
    /** The query string (without `?`), safe to put in a header. */
    query: string
  }

function decode (segment: string): string | undefined {
  try {
    return decodeURIComponent(segment)
  } catch {
    return undefined
  }
}

/**
 * Whether any `/`- or `\`-separated part starts with a dot, here or after any further round of
 * percent-decoding (`%2e`, `%252e`, `..%5c`). Lenient byte-wise decoding, so a malformed sequence
 * cannot hide a dot behind a decoding error.
 */
export function hasDotSegment (decoded: string): boolean {
  let current = decoded
  for (let round = 0; round < 8; round++) {
    if (current.split(/[\\/]/).some((part) => part.startsWith('.'))) return true
    const next = current.replace(/%([0-9a-fA-F]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)))
    if (next === current) return false
    current = next
  }
  return true
}

/** Percent-encodes every byte outside printable ASCII, so the value is always a legal header. */
export function headerSafe (value: string): string {
  return value.replace(/[^\x21-\x7e]/g, (c) => [...Buffer.from(c, 'utf8')].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join(''))
}

/** One path segment as it appears in a URL we build (`@` left readable, as in `@scope/name@1.0.0`). */
export function encodeSegment (segment: string): string {
  return encodeURIComponent(segment).replace(/%40/g, '@')
}

/** `/app-ui/<name>@<version>/` from checked parts. */
export function appBase (prefix: string, name: string, version: string): string {
  return `${prefix}/${name.split('/').map(encodeSegment).join('/')}@${encodeSegment(version)}/`
}

/**
 * @param rawUrl the request target as received (`request.raw.url`)
 * @param prefixSegments the plugin prefix, split (`['app-ui']`)
 */
export function parseAppUiUrl (rawUrl: string, prefixSegments: readonly string[]): AppUiTarget {
  let target = rawUrl
  if (!target.startsWith('/')) {
    // absolute-form (`GET http://host/app-ui/... HTTP/1.1`)
    try {
      const url = new URL(target)
      target = url.pathname + url.search
    } catch {
      return { kind: 'bad' }
    }
  }
  const queryAt = target.indexOf('?')
  const hashAt = target.indexOf('#')
  const pathEnd = Math.min(queryAt === -1 ? target.length : queryAt, hashAt === -1 ? target.length : hashAt)
  const rawPath = target.slice(0, pathEnd)
  const query = queryAt === -1 || queryAt !== pathEnd ? '' : target.slice(queryAt + 1, hashAt === -1 || hashAt < queryAt ? undefined : hashAt)

  const raw = rawPath.split('/')
  let i = 1
  while (i < raw.length && raw[i] === '') i++ // a router configured to ignore duplicate slashes
  for (const expected of prefixSegments) {
    const segment = i < raw.length ? decode(raw[i]) : undefined
    if (segment !== expected) return { kind: 'none' }
    i++
  }

  const first = i < raw.length ? decode(raw[i]) : undefined
  if (first === undefined) return i < raw.length ? { kind: 'bad' } : { kind: 'none' }
  i++
  let appSegment = first
  if (first.startsWith('@')) {
    const second = i < raw.length ? decode(raw[i]) : undefined
    if (second === undefined) return i < raw.length ? { kind: 'bad' } : { kind: 'none' }
    i++
    if (second.includes('/')) return { kind: 'none' }
    appSegment = `${first}/${second}`
  }
  if (first.includes('/')) return { kind: 'none' }
  const at = appSegment.lastIndexOf('@')
  if (at <= 0 || at === appSegment.length - 1) return { kind: 'none' }
  const name = appSegment.slice(0, at)
  const version = appSegment.slice(at + 1)

  const safeQuery = headerSafe(query)
  if (i >= raw.length) {
    return { kind: 'app', name, version, segments: null, trailingSlash: false, dotSegment: false, query: safeQuery }
  }
  const parts: string[] = []
  let dotSegment = false
  for (const rawSegment of raw.slice(i)) {
    const segment = decode(rawSegment)
    if (segment === undefined || segment.includes('\0')) return { kind: 'bad' }
    if (hasDotSegment(segment)) dotSegment = true
    // A backslash is a separator to browsers and to Windows; it is one here too.
    parts.push(...segment.split(/[\\/]/))
  }
  const trailingSlash = parts[parts.length - 1] === ''
  return { kind: 'app', name, version, segments: parts.filter((p) => p !== ''), trailingSlash, dotSegment, query: safeQuery }
}
