import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import formbody from '@fastify/formbody'
import helmet from '@fastify/helmet'
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import { LOGIN_PAGE_HEADERS, renderHomePage, renderLoginPage, type LoginPageOptions } from '../auth/login-page.js'
import { safeRedirect } from '../auth/redirect.js'
import { writeCookies } from '../auth/session-cookie.js'
import { Errors } from '../errors.js'
import { HtmlPage, LoginFormBody, LoginPageQuery } from '../schemas/auth.js'
import { ErrorBody } from '../schemas/common.js'

/** Same text whether the user is unknown or the password wrong. */
const LOGIN_FAILED = 'Invalid username or password.'

function sendPage (reply: FastifyReply, statusCode: number, page: LoginPageOptions): FastifyReply {
  return reply.code(statusCode).headers(LOGIN_PAGE_HEADERS).send(renderLoginPage(page))
}

function originOf (url: string): string | undefined {
  try {
    const origin = new URL(url).origin
    return origin === 'null' ? undefined : origin
  } catch {
    return undefined
  }
}

/**
 * Login and logout CSRF: a cross-site page must not log the browser into an account of the
 * attacker's, nor sign it out. Browsers send Sec-Fetch-Site and Origin on a form POST (page scripts
 * cannot forge either); a request without them (curl, scripts) is no browser being abused and is
 * allowed. `Sec-Fetch-Site: same-origin` is taken as proof on its own, because browsers send
 * `Origin: null` for same-origin posts from pages with a strict referrer policy or privacy settings.
 */
function rejectCrossSite (what: 'login' | 'logout', Refusal: new () => Error) {
  return async (request: FastifyRequest): Promise<void> => {
    const fetchSite = request.headers['sec-fetch-site']
    if (fetchSite === 'cross-site') throw new Refusal()
    if (fetchSite === 'same-origin') return
    const origin = request.headers.origin
    if (origin === undefined) return
    // Both through URL so that default ports compare equal (Host `example.com:443`, Origin
    // `https://example.com`); an opaque Origin (`null`) never matches.
    const own = originOf(`${request.protocol}://${request.host}`)
    if (own === undefined || originOf(origin) !== own) {
      // Behind a TLS-terminating proxy without TRUST_PROXY the service sees http and every browser
      // login is refused here; the log line says which origins were compared.
      request.log.warn({ origin, expected: own }, `cross-site ${what} rejected`)
      throw new Refusal()
    }
  }
}

/**
 * The browser login: `GET /login` (the form), `POST /login` (sets the session cookie), `GET /` (the
 * home page) and `POST /logout` (signs out).
 */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  // Only here: the API never parses urlencoded bodies.
  await fastify.register(formbody)
  await writeCookies(fastify)
  // The usual browser protections for these HTML pages (COOP/CORP, no framing); the pages set their
  // own, stricter Content-Security-Policy. HSTS comes from src/plugins/hosts.ts, on https only.
  await fastify.register(helmet, { contentSecurityPolicy: false, strictTransportSecurity: false, frameguard: { action: 'deny' }, referrerPolicy: { policy: 'same-origin' } })

  fastify.get('/login', {
    schema: { querystring: LoginPageQuery, response: { 200: HtmlPage, 400: ErrorBody } }
  }, async (request, reply) => sendPage(reply, 200, { redirect: safeRedirect(request.query.redirect) }))

  fastify.get('/', {
    schema: { response: { 200: HtmlPage, 302: Type.Null({ description: 'Not signed in: to the login page' }) } }
  }, async (request, reply) => {
    const session = await fastify.cookieSession(request, reply)
    if (session === null) return reply.redirect('/login?redirect=%2F', 302)
    const apps = fastify.apps.apps.map((a) => ({
      name: a.name, version: a.version, url: a.publicDir === undefined ? undefined : `/app-ui/${a.name}@${a.version}/`, reaktors: a.pollingReaktors.length
    }))
    return reply.code(200).headers({ ...LOGIN_PAGE_HEADERS, 'cache-control': 'private, no-store' }).send(renderHomePage(session.username, apps))
  })

  fastify.post('/login', {
    // A person at the form sees the refusals (cross-site, too many attempts) on the form itself.
    errorHandler: (err: FastifyError, request, reply) => {
      if (err.statusCode === 403 || err.statusCode === 429) {
        return sendPage(reply, err.statusCode, { redirect: safeRedirect((request.body as { redirect?: unknown } | undefined)?.redirect), error: err.message })
      }
      throw err
    },
    onRequest: rejectCrossSite('login', Errors.CrossSiteLogin),
    preHandler: fastify.limitLoginAttempts,
    schema: {
      body: LoginFormBody,
      response: {
        303: Type.Null({ description: 'Logged in: redirect to the validated target, with the session cookie' }),
        400: ErrorBody,
        401: HtmlPage,
        403: HtmlPage,
        429: HtmlPage
      }
    }
  }, async (request, reply) => {
    const { username, password } = request.body
    const redirect = safeRedirect(request.body.redirect)
    const session = await fastify.login(request, username, password)
    if (session === null) return sendPage(reply, 401, { redirect, username, error: LOGIN_FAILED })
    fastify.setSessionCookie(request, reply, session.token)
    return reply.header('cache-control', 'no-store').redirect(redirect, 303)
  })

  // A form post without fields. Only POST signs out: a GET (a link, a prefetch, an <img>) must not.
  fastify.post('/logout', {
    onRequest: rejectCrossSite('logout', Errors.CrossSiteLogout),
    schema: {
      response: {
        303: Type.Null({ description: 'Signed out (or was not signed in): to the login page, the session cookie cleared' }),
        403: ErrorBody,
        503: ErrorBody
      }
    }
  }, async (request, reply) => {
    for (const session of await fastify.endCookieSession(request, reply)) {
      request.log.info({ userId: session.userId }, 'logged out')
      await fastify.audit(request, { action: 'auth.logout', targets: [session.username], actor: session.username, details: { via: 'browser' } })
    }
    return reply.header('cache-control', 'no-store').redirect('/login', 303)
  })
}
export default routes
