import fp from 'fastify-plugin'
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { ApiTokenStore } from '../auth/api-tokens.js'
import { bootstrapAdmin } from '../auth/bootstrap.js'
import { LoginThrottle } from '../auth/login-throttle.js'
import { dummyPasswordHash } from '../auth/password.js'
import { SessionCache } from '../auth/session-cache.js'
import { createSessionService } from '../auth/sessions.js'
import { loadTokenTagger } from '../auth/token-tag.js'
import { cookieSession, cookieValues, plantedCookieScopes, sessionCookieName } from '../auth/session-cookie.js'
import { TOKEN_HEADER, type AuthSession, type SessionService } from '../auth/types.js'
import { verifyCredentials, type VerifiedUser } from '../auth/users.js'
import { Errors } from '../errors.js'
import { scrapeCounter, scrapeGauge } from '../metrics/read-at-scrape.js'

/** Characters of a failed login's username kept as its audit actor: whatever was typed, bounded. */
const MAX_AUDITED_USERNAME = 64

declare module 'fastify' {
  interface FastifyInstance {
    sessions: SessionService
    /** API tokens for scripts: issue, list, revoke (src/auth/api-tokens.ts); `sessions` checks them. */
    apiTokens: ApiTokenStore
    /** onRequest hook: 401 unless X-Service-Token names a live session or API token; sets request.auth. */
    authenticate: (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void
    /** preHandler hook (after authenticate): 403 unless the caller has the admin role. */
    requireAdmin: (request: FastifyRequest, reply: FastifyReply) => Promise<void>
    /**
     * Both login routes: a NEW session for valid credentials (never a promoted old one: no
     * fixation), or null (same time whether or not the user exists). Logs the outcome.
     */
    login: (request: FastifyRequest, username: string, password: string) => Promise<{ token: string, expiresAt: Date } | null>
    /** preHandler hook of the login routes: 429 past the failed-login budgets (src/auth/login-throttle.ts). */
    limitLoginAttempts: (request: FastifyRequest, reply: FastifyReply) => Promise<void>
    /** The same budgets for a signed-in user's own password check (`POST /api/v1/auth/password`). */
    limitPasswordAttempts: (request: FastifyRequest, reply: FastifyReply) => Promise<void>
    /**
     * The stored hash when `password` is the signed-in user's, else null; a wrong one stays counted
     * against the login budgets like a failed login (after limitPasswordAttempts).
     */
    checkOwnPassword: (request: FastifyRequest, password: string) => Promise<string | null>
    /**
     * The session of the browser's session cookie (see src/auth/session-cookie.ts), or null. With
     * duplicates of that cookie, the answer also expires them wherever they may have been planted.
     * Answered at once, without a promise, when that is known here (no cookie; one value the session
     * cache vouches for), as on most requests of an app UI.
     */
    cookieSession: (request: FastifyRequest, reply: FastifyReply) => AuthSession | null | Promise<AuthSession | null>
    /**
     * Signs the browser out: revokes every live session its session cookie names (through
     * `sessions.revoke`, so every node drops them within a second) and clears the cookie. Returns
     * the sessions it ended (none without a cookie). Throws, leaving the cookie, when a revocation fails.
     */
    endCookieSession: (request: FastifyRequest, reply: FastifyReply) => Promise<AuthSession[]>
    /** Sets or clears the browser session cookie read by the app-UI token helper (in a scope that registered writeCookies of src/auth/session-cookie.ts). */
    setSessionCookie: (request: FastifyRequest, reply: FastifyReply, token: string) => void
    clearSessionCookie: (request: FastifyRequest, reply: FastifyReply) => void
  }
  interface FastifyRequest {
    auth: AuthSession | null
    /** Set by limitLoginAttempts: the attempt counted as failed until login() succeeds. */
    loginAttempt: { username: string, address: string } | null
  }
}

/**
 * Users, sessions and API authentication. The API authenticates by the X-Service-Token header
 * only; the cookie exists for the browser (login page, app UIs) and is never accepted by the API.
 */
export default fp(async (fastify) => {
  const { config, db } = fastify

  // Token checks are answered from memory while a logout on any node still takes effect within
  // 1 s (LISTEN/NOTIFY on a dedicated connection; see src/auth/session-cache.ts).
  const cache = new SessionCache({ url: fastify.databaseUrl, applicationName: `reaktor-sessions ${config.nodeId}`.slice(0, 63), log: fastify.log })
  await cache.start()
  fastify.addHook('onClose', async () => { await cache.stop() })
  const tagger = await loadTokenTagger(db)
  const apiTokens = new ApiTokenStore(db, tagger, cache, fastify.log)
  const sessions = createSessionService(db, config.sessionTtlMs, tagger, cache, apiTokens)
  fastify.decorate('sessions', sessions)
  fastify.decorate('apiTokens', apiTokens)
  // Last-used writes still in flight finish before the pool closes.
  fastify.addHook('onClose', async () => { await apiTokens.lastUsed.settled() })
  scrapeCounter(fastify.metrics.registry, 'reaktor_session_cache_hits_total', 'Token checks answered from memory', () => cache.hits)
  scrapeGauge(fastify.metrics.registry, 'reaktor_session_cache_trusted', '1 while the revocation listener vouches for cached token checks, else 0', () => cache.trusted ? 1 : 0)
  fastify.decorateRequest('auth', null)
  fastify.decorateRequest('loginAttempt', null)

  // A callback hook, answered at once when the session cache vouches for the token (what verify
  // would answer from memory, see `cached`): most API requests then cost no promise here. Any other
  // token goes through verify, as before.
  fastify.decorate('authenticate', (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const header = request.headers[TOKEN_HEADER]
    const token = typeof header === 'string' ? header : undefined
    const cached = token === undefined ? undefined : sessions.cached(token)
    if (cached !== undefined) {
      request.auth = cached
      done()
      return
    }
    sessions.verify(token).then((session) => {
      if (session === null) {
        done(new Errors.Unauthorized())
        return
      }
      request.auth = session
      done()
    }, done)
  })

  fastify.decorate('requireAdmin', async (request: FastifyRequest) => {
    if (request.auth?.role !== 'admin') throw new Errors.Forbidden('This needs the admin role')
  })

  fastify.decorate('login', async (request: FastifyRequest, username: string, password: string) => {
    const user = await checkPassword(request, username, password)
    // Only while the user is still enabled and has the password just checked (see insertSession).
    const session = user === null ? null : await sessions.create(user.id, user.passwordHash)
    if (user === null || session === null) {
      request.log.info({ username }, 'login failed')
      // Not awaited: a failed login answers as fast as without its row. The throttle (a 429 before
      // any of this) bounds how many rows a flood of failures can write.
      void fastify.audit(request, { action: 'auth.login_failed', targets: [], actor: [...username].slice(0, MAX_AUDITED_USERNAME).join(''), details: { route: request.routeOptions.url } })
      return null
    }
    attemptSucceeded(request)
    request.log.info({ userId: user.id, username: user.username }, 'logged in')
    await fastify.audit(request, { action: 'auth.login', targets: [], actor: user.username, details: { route: request.routeOptions.url } })
    return session
  })

  fastify.decorate('checkOwnPassword', async (request: FastifyRequest, password: string) => {
    const user = await checkPassword(request, request.auth?.username ?? '', password)
    // By id too: a name freed by a delete and taken again is another user.
    if (user === null || user.id !== request.auth?.userId) {
      // A stolen session guessing its user's password is a failed login as much as a guess at the
      // login form: recorded as one, and, like one, without making the answer wait for its row.
      void fastify.audit(request, { action: 'auth.login_failed', targets: [], details: { route: request.routeOptions.url } })
      return null
    }
    attemptSucceeded(request)
    return user.passwordHash
  })

  // One budget for both login routes, so the form and the JSON login draw from the same counts.
  // The address is request.ip: Fastify reads X-Forwarded-For only when TRUST_PROXY is set, so a
  // client cannot pick its own address. (Counters are per node; a cluster multiplies the budget
  // by its size, which still bounds guessing.)
  const throttle = new LoginThrottle({ limit: config.loginRateLimit })
  const limitAttempts = async (request: FastifyRequest, reply: FastifyReply, username: string): Promise<void> => {
    const { retryAfterSeconds, limitedBy } = throttle.begin(username, request.ip)
    if (retryAfterSeconds === 0) {
      request.loginAttempt = { username, address: request.ip }
      return
    }
    request.log.warn({ limitedBy }, 'login rate limit exceeded')
    void reply.header('retry-after', String(retryAfterSeconds))
    throw new Errors.LoginRateLimited(retryAfterSeconds)
  }
  // The password check of the login routes and of the own-password change, counted in the same budgets.
  const checkPassword = async (request: FastifyRequest, username: string, password: string): Promise<VerifiedUser | null> => {
    try {
      return await verifyCredentials(db, username, password)
    } catch (err) {
      // No answer about the password (the database is unavailable: 503, retry): not a failed login.
      // A client retrying through an outage, as the 503 invites, must not find itself locked out after it.
      const attempt = request.loginAttempt
      if (attempt !== null) throttle.unanswered(attempt.username, attempt.address)
      throw err
    }
  }
  const attemptSucceeded = (request: FastifyRequest): void => {
    const attempt = request.loginAttempt
    if (attempt !== null) throttle.succeeded(attempt.username, attempt.address)
  }
  fastify.decorate('limitLoginAttempts', async (request: FastifyRequest, reply: FastifyReply) => {
    // Runs after body validation: the username is a string.
    await limitAttempts(request, reply, (request.body as { username: string }).username)
  })
  // A stolen session guessing its user's password draws from the same budget as guesses at the login.
  fastify.decorate('limitPasswordAttempts', async (request: FastifyRequest, reply: FastifyReply) => {
    await limitAttempts(request, reply, request.auth?.username ?? '')
  })

  const maxAgeSeconds = Math.max(1, Math.ceil(config.sessionTtlMs / 1000))
  // request.protocol is 'https' for TLS, or behind a trusted proxy (TRUST_PROXY) saying so; over
  // https the cookie is `__Host-reaktor_session`, which nobody but this host's https pages can set.
  const https = (request: FastifyRequest): boolean => request.protocol === 'https'
  // Setting and clearing must name the same path and flags, or the browser keeps the cookie.
  const cookieScope = (request: FastifyRequest) => ({ path: '/', sameSite: 'lax' as const, secure: https(request) })
  // The cookie carries login sessions only: an API token is for scripts, sent as X-Service-Token,
  // and one planted in a browser's cookie must not sign that browser in.
  const loginSession = async (token: string): Promise<AuthSession | null> => {
    const session = await sessions.verify(token)
    return session?.kind === 'session' ? session : null
  }
  fastify.decorate('cookieSession', (request: FastifyRequest, reply: FastifyReply) => {
    const name = sessionCookieName(https(request))
    const values = cookieValues(request.headers.cookie, name)
    if (values.length === 0) return null
    const cached = values.length === 1 ? sessions.cached(values[0]) : undefined
    if (cached !== undefined) return cached.kind === 'session' ? cached : null
    return readCookieSession(request, reply, name, values)
  })
  /** cookieSession when the values must be looked up, or are several (planted ones are expired). */
  const readCookieSession = async (request: FastifyRequest, reply: FastifyReply, name: string, values: string[]): Promise<AuthSession | null> => {
    const { session, conflicting } = await cookieSession(values, loginSession)
    if (conflicting) request.log.warn({ values: values.length }, 'conflicting session cookies: none is used')
    if (values.length > 1) {
      // The token helper answers null while one name holds several values; the page's next load
      // must not find the planted ones again.
      for (const scope of plantedCookieScopes(request.url.split('?')[0], request.hostname)) {
        void reply.clearCookie(name, { ...cookieScope(request), ...scope })
      }
    }
    return session
  }
  fastify.decorate('setSessionCookie', (request: FastifyRequest, reply: FastifyReply, token: string) => {
    void reply.setCookie(sessionCookieName(https(request)), token, {
      ...cookieScope(request),
      maxAge: maxAgeSeconds,
      // Deliberately NOT HttpOnly: the app-UI helper window.getServiceAuthToken() reads this cookie
      // in the page to send it as X-Service-Token. Script access is the price of the spec's helper;
      // the API never accepts the cookie itself (no CSRF through it), and the app UIs are served
      // with a strict CSP that limits which scripts could read it.
      httpOnly: false
    })
  })
  fastify.decorate('clearSessionCookie', (request: FastifyRequest, reply: FastifyReply) => {
    void reply.clearCookie(sessionCookieName(https(request)), cookieScope(request))
  })
  fastify.decorate('endCookieSession', async (request: FastifyRequest, reply: FastifyReply) => {
    // Every login session the cookie's values name, a planted one too: none stays usable here.
    const values = cookieValues(request.headers.cookie, sessionCookieName(https(request)))
    const { live } = await cookieSession(values, loginSession)
    for (const { token } of live) await sessions.revoke(token)
    fastify.clearSessionCookie(request, reply)
    return live.map(({ session }) => session)
  })

  // Ready before the first login, so that an unknown user's first failed login is not slower.
  await dummyPasswordHash()
  await bootstrapAdmin(db, config, fastify.log)
}, { name: 'auth', dependencies: ['config', 'db', 'metrics', 'audit'] })
