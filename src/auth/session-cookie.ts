import cookie from '@fastify/cookie'
import type { FastifyInstance } from 'fastify'
import { SECURE_SESSION_COOKIE, SESSION_COOKIE, type AuthSession } from './types.js'

/**
 * Registers @fastify/cookie in a scope whose answers set or clear the session cookie (the login
 * pages, the API's login and logout, the app UIs): fastify.setSessionCookie and clearSessionCookie
 * work on the replies of such a scope only. Not for the whole service: the plugin adds an onSend
 * hook that every answer of its scope runs through, and the busiest API routes set no cookie.
 * Writes only: the session cookie is read by cookieSession (every value of its name, which the
 * plugin's parser would reduce to the first), so no Cookie header is parsed for it.
 */
export async function writeCookies (fastify: FastifyInstance): Promise<void> {
  await fastify.register(cookie, { hook: false })
}

/** More values than this of one cookie name are not looked at (each may cost a lookup). */
const MAX_VALUES = 4

/** The session cookie's name for a request the service sees as https or not. */
export function sessionCookieName (https: boolean): string {
  return https ? SECURE_SESSION_COOKIE : SESSION_COOKIE
}

/**
 * Every distinct value of cookie `name` in a Cookie header, in order. A browser sends one per
 * path and domain it holds, longest path first, so a cookie planted with a longer path comes
 * before the real one (a parser that keeps the first value lets the planted one win).
 */
export function cookieValues (header: string | undefined, name: string): string[] {
  if (header === undefined) return []
  const values: string[] = []
  // Read in place (it runs on every app-UI request): only a part whose name contains `name` is cut
  // out. The next `=` and the next `name` are searched again only once passed, so a header of many
  // parts is read in one pass.
  let eq = header.indexOf('=')
  let at = header.indexOf(name)
  for (let start = 0; start <= header.length && eq >= 0 && at >= 0;) {
    let end = header.indexOf(';', start)
    if (end < 0) end = header.length
    if (eq < start && (eq = header.indexOf('=', start)) < 0) break
    if (at < start && (at = header.indexOf(name, start)) < 0) break
    if (eq < end && at < eq && header.slice(start, eq).trim() === name) {
      let value = header.slice(eq + 1, end).trim()
      if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1)
      // Without a `%` there is nothing to decode.
      if (value.includes('%')) {
        try {
          value = decodeURIComponent(value)
        } catch {
          // Kept as sent: it is no token of ours either way.
        }
      }
      if (!values.includes(value)) values.push(value)
    }
    start = end + 1
  }
  return values
}

/** A value of the session cookie that names a live session, and that session. */
export interface LiveCookie { token: string, session: AuthSession }

/**
 * The session of a browser's cookie header: the one live session among the values of the session
 * cookie. A planted value that is no live session is skipped, so it cannot hide the real one; two
 * different live sessions mean one was planted (the service sets one cookie, on Path=/), and
 * since nothing tells which, neither is used. `live` lists every value that is a live session
 * (a sign-out ends them all, whichever was planted).
 */
export async function cookieSession (values: string[], verify: (token: string) => Promise<AuthSession | null>): Promise<{ session: AuthSession | null, conflicting: boolean, live: LiveCookie[] }> {
  const checked = values.slice(0, MAX_VALUES)
  const sessions = await Promise.all(checked.map(verify))
  const live = checked.flatMap((token, i) => sessions[i] === null ? [] : [{ token, session: sessions[i] }])
  return live.length === 1 ? { session: live[0].session, conflicting: false, live } : { session: null, conflicting: live.length > 1, live }
}

const MAX_SCOPES = 32

/**
 * Where a planted duplicate of the session cookie can sit, so that it can be expired: every path
 * a cookie sent with this request may have (RFC 6265 path-match: each prefix of the request path
 * that ends before or at a `/`) on this host, and every path including `/` on each parent domain.
 * The service's own cookie (host-only, Path=/) is never among them. Public suffixes among the
 * parents are harmless: browsers ignore a Set-Cookie for them.
 */
export function plantedCookieScopes (requestPath: string, hostname: string): Array<{ path: string, domain?: string }> {
  const paths: string[] = []
  for (let i = 1; i < requestPath.length; i++) {
    if (requestPath[i] === '/') paths.push(requestPath.slice(0, i), requestPath.slice(0, i + 1))
  }
  if (requestPath.length > 1 && !requestPath.endsWith('/')) paths.push(requestPath)
  const scopes: Array<{ path: string, domain?: string }> = paths.map((path) => ({ path }))
  const labels = /^[\d.]+$|^\[|:/.test(hostname) ? [] : hostname.toLowerCase().split('.')
  for (let i = 1; i < labels.length - 1; i++) {
    const domain = labels.slice(i).join('.')
    for (const path of ['/', ...paths]) scopes.push({ path, domain })
  }
  return scopes.slice(0, MAX_SCOPES)
}
