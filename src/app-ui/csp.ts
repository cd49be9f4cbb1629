import fs from 'node:fs/promises'
import path from 'node:path'
import { HELPER_SCRIPT_HASH } from './helper-script.js'

/** Read by the server only; never served (it is a dot file). */
export const EXTERNAL_RESOURCES_FILE = '.service-external-resources.json'

interface Log { debug: (obj: object, msg: string) => void, warn: (obj: object, msg: string) => void }

/**
 * Characters that could break out of a CSP source expression or widen it. The URL parser would
 * silently drop some of them (tabs, newlines) or percent-encode others, so they are refused on the
 * raw entry before parsing.
 */
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u0020\u007f;,'"*`<>\\]/

/**
 * Reduces one `allowedOrigins` entry to an origin (`https://cdn.example.com:8443`), or returns a
 * reason why it is refused. Only http(s) origins with a real host survive: keywords
 * (`'unsafe-eval'`), wildcards, schemes (`data:`), credentials and anything yielding a `null`
 * origin are refused, so an entry can add an origin and never anything else to the policy.
 */
export function toOrigin (entry: unknown): { origin: string } | { reason: string } {
  if (typeof entry !== 'string') return { reason: 'not a string' }
  if (entry === '') return { reason: 'empty' }
  if (UNSAFE.test(entry)) return { reason: 'contains a space, quote, wildcard, separator or control character' }
  let url: URL
  try {
    url = new URL(entry)
  } catch {
    return { reason: 'not an absolute URL' }
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { reason: `scheme ${url.protocol} is not allowed; only http: and https:` }
  if (url.username !== '' || url.password !== '') return { reason: 'carries credentials' }
  if (url.hostname === '' || url.origin === 'null') return { reason: 'has no host' }
  // CSP host sources have no syntax for IPv6 literals; the browser would ignore the source anyway.
  if (url.hostname.startsWith('[')) return { reason: 'IPv6 address literals cannot be expressed in a CSP' }
  return { origin: url.origin }
}

/** The allowed origins of a parsed config file; every refused entry is logged with the app's name. */
export function parseAllowedOrigins (config: unknown, app: string, log: Log): string[] {
  if (typeof config !== 'object' || config === null || Array.isArray(config) ||
    !Array.isArray((config as { allowedOrigins?: unknown }).allowedOrigins)) {
    log.warn({ app }, `app ${app}: ${EXTERNAL_RESOURCES_FILE} is not an object with an allowedOrigins array; only same-origin resources are allowed`)
    return []
  }
  const entries = (config as { allowedOrigins: unknown[] }).allowedOrigins
  if (!entries.every((e) => typeof e === 'string')) {
    log.warn({ app }, `app ${app}: ${EXTERNAL_RESOURCES_FILE}: allowedOrigins must be an array of strings; only same-origin resources are allowed`)
    return []
  }
  const origins = new Set<string>()
  for (const entry of entries) {
    const result = toOrigin(entry)
    if ('origin' in result) origins.add(result.origin)
    else log.warn({ app, entry }, `app ${app}: allowedOrigins entry ${JSON.stringify(entry)} dropped: ${result.reason}`)
  }
  return [...origins]
}

/**
 * The Content-Security-Policy of an app. Scripts, styles, images and fonts: same origin plus the
 * allowed origins; inline styles allowed; inline scripts only the token helper (by hash).
 * Deliberately no `default-src` and no `connect-src`: fetch/XHR are governed by CORS.
 */
export function buildCsp (origins: readonly string[]): string {
  const sources = ["'self'", ...origins].join(' ')
  return [
    `script-src ${sources} ${HELPER_SCRIPT_HASH}`,
    `style-src ${sources} 'unsafe-inline'`,
    `img-src ${sources}`,
    `font-src ${sources}`,
    "object-src 'none'",
    "base-uri 'self'",
    "frame-ancestors 'self'"
  ].join('; ')
}

/**
 * Reads `public/.service-external-resources.json` of one app. Unreadable, malformed, or a link
 * leading out of `public/`: same-origin only, with a warning naming the app. The file is optional,
 * so its absence is only a debug line.
 */
export async function loadAllowedOrigins (publicRoot: string, app: string, log: Log): Promise<string[]> {
  const file = path.join(publicRoot, EXTERNAL_RESOURCES_FILE)
  let text: string
  try {
    const real = await fs.realpath(file)
    if (!real.startsWith(publicRoot + path.sep)) throw new Error('links outside public/')
    text = await fs.readFile(real, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      log.debug({ app }, `app ${app}: no ${EXTERNAL_RESOURCES_FILE}; only same-origin resources are allowed`)
    } else {
      log.warn({ app, err }, `app ${app}: unreadable ${EXTERNAL_RESOURCES_FILE}; only same-origin resources are allowed`)
    }
    return []
  }
  let config: unknown
  try {
    config = JSON.parse(text)
  } catch {
    log.warn({ app }, `app ${app}: ${EXTERNAL_RESOURCES_FILE} is not valid JSON; only same-origin resources are allowed`)
    return []
  }
  return parseAllowedOrigins(config, app, log)
}
