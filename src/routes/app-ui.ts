import fs from 'node:fs'
import fsp from 'node:fs/promises'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { writeCookies } from '../auth/session-cookie.js'
import type { AuthSession } from '../auth/types.js'
import { buildCsp } from '../app-ui/csp.js'
import type { FileCache } from '../app-ui/file-cache.js'
import { contentTypeOf, isHtml } from '../app-ui/mime.js'
import { chooseEncoding, etagMatches } from '../app-ui/negotiation.js'
import { HELPER_SCRIPT_TAG, HELPER_TAG_BYTES, injectHelper } from '../app-ui/helper-script.js'
import { prepareFile, preparedBytesBound, variantOf, type CachedFile, type Encoding } from '../app-ui/prepared-file.js'
import { cacheKey, type Site } from '../app-ui/site.js'
import { appBase, encodeSegment, parseAppUiUrl } from '../app-ui/url.js'

/** Files up to this size are served from memory; larger ones are streamed from disk (pages are the exception). */
const MAX_CACHED_FILE_BYTES = 1024 * 1024

/**
 * A request target already answered with a file from memory: the next request for the exact same
 * raw URL skips parsing and resolving and sends headers computed once, for as long as nothing
 * changed under its app's public/ (the site's epoch is still the one it was resolved in). The
 * session is still checked on every request.
 */
interface HotPath {
  site: Site
  epoch: number
  /** The cache key of the file it answers with. */
  key: string
  /** All response headers per variant (CSP, caching, type, validator, length, encoding). */
  headers: { identity: Record<string, string>, br?: Record<string, string>, gzip?: Record<string, string> }
}

/** Bounds the hot-path index (query strings make the variety of raw URLs unbounded). */
const MAX_HOT_PATHS = 10_000

/**
 * Every file is revalidated on every use: HTML on every navigation (so the login check runs), and
 * assets too, since files under public/ change while the service runs (an author's edit, a secret
 * removed), and a browser holding an asset for an hour would show the old one after a reload. The
 * revalidation is a conditional request answered 304 from memory.
 */
const CACHE_CONTROL = 'private, no-cache'

export interface AppUiRouteOptions {
  /** Memory for prepared files (APP_UI_CACHE_BYTES), shared by every app. */
  cache: FileCache
  /** The site (public/ folder, watch, policy) of each app that has a usable one. */
  /**
   * The site of an app version: a folder app's, opened at start; or, for a published app, a
   * function that fetches and opens the version's (called once the session is known good).
   */
  siteFor: (name: string, version: string) => Site | undefined | (() => Promise<Site | undefined>)
  /** Told each time a file is read and prepared (the plugin's metric). */
  countPrepared: () => void
}

/**
 * `GET` and `HEAD /app-ui/<name>@<version>/…`: the files of an app's public/ folder, behind the
 * browser session cookie, with the app's Content-Security-Policy and the token helper in every
 * page. Registered by src/plugins/app-ui.ts inside its own scope, which sets the prefix.
 */
const routes: FastifyPluginAsync<AppUiRouteOptions> = async (fastify, { cache, siteFor, countPrepared }) => {
  await writeCookies(fastify)
  const prefix = fastify.prefix
  const prefixSegments = prefix.split('/').filter((s) => s !== '')
  const sameOriginCsp = buildCsp([])

  const hotPaths = new Map<string, HotPath>()
  /**
   * Headers of every answer of this scope (errors and redirects included), set by the handler
   * before anything can fail (a hot path's own headers carry them); the slow path replaces the
   * policy with the app's own once the app is known. Only GET and HEAD reach this scope: other
   * methods and malformed URLs are answered by the root's handlers.
   */
  const scopeHeaders = (reply: FastifyReply): FastifyReply =>
    reply.header('content-security-policy', sameOriginCsp).header('x-content-type-options', 'nosniff').header('referrer-policy', 'same-origin')

  const notFound = (reply: FastifyReply): FastifyReply => {
    reply.callNotFound()
    return reply
  }

  const loginRedirect = (reply: FastifyReply, target: string): FastifyReply =>
    reply.header('cache-control', 'no-store').redirect(`/login?redirect=${encodeURIComponent(target)}`, 302)

  const isHot = (hot: HotPath | undefined, epoch: number, key: string): boolean => hot !== undefined && hot.epoch === epoch && hot.key === key

  const hotHeaders = (site: Site, file: CachedFile, encoding: Encoding | undefined): Record<string, string> => {
    const variant = variantOf(file, encoding)
    const headers: Record<string, string> = {
      'content-security-policy': site.csp,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'same-origin',
      'cache-control': CACHE_CONTROL,
      'content-type': file.contentType,
      etag: variant.etag
    }
    if (file.br !== undefined || file.gzip !== undefined) headers.vary = 'Accept-Encoding'
    if (encoding !== undefined && variant !== file.identity) headers['content-encoding'] = encoding
    headers['content-length'] = String(variant.body.length)
    return headers
  }

  /** Answers a file held in memory (a variant chosen by Accept-Encoding), or 304 for a matching ETag. */
  const sendVariant = (request: FastifyRequest, reply: FastifyReply, file: CachedFile, encoding: Encoding | undefined, headers: Record<string, string>): FastifyReply => {
    const variant = variantOf(file, encoding)
    if (etagMatches(request.headers['if-none-match'], variant.etag)) {
      return reply.headers(headers).removeHeader('content-length').removeHeader('content-encoding').code(304).send()
    }
    return reply.headers(headers).send(request.method === 'HEAD' ? '' : variant.body)
  }

  /**
   * The hot path, synchronous (no promise per request): a request target already answered from
   * memory, with a session the cache vouches for, skips parsing and resolving. Anything else goes
   * the slow way (`resolve`).
   */
  const handler = (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> | undefined => {
    const hot = hotPaths.get(request.raw.url ?? '/')
    const hotFile = hot === undefined || hot.epoch !== hot.site.epoch ? undefined : cache.peek(hot.key)
    if (hot === undefined || hotFile === undefined) return resolve(request, reply, undefined)
    let session: ReturnType<typeof fastify.cookieSession>
    try {
      session = fastify.cookieSession(request, reply)
    } catch (err) {
      // An error answer of this scope carries its headers too (the hook left them to the hot path).
      scopeHeaders(reply)
      throw err
    }
    if (session instanceof Promise) return hotAfterLookup(request, reply, hot, hotFile, session)
    if (session === null) return resolve(request, reply, session)
    sendHot(request, reply, hot, hotFile)
    return undefined
  }

  const sendHot = (request: FastifyRequest, reply: FastifyReply, hot: HotPath, file: CachedFile): void => {
    const encoding = chooseEncoding(request.headers['accept-encoding'], file)
    sendVariant(request, reply, file, encoding, encoding === undefined ? hot.headers.identity : hot.headers[encoding] ?? hot.headers.identity)
  }

  /** A hot path whose session is read from the database first: a change reported meanwhile makes it stale. */
  const hotAfterLookup = async (request: FastifyRequest, reply: FastifyReply, hot: HotPath, file: CachedFile, lookup: Promise<AuthSession | null>): Promise<FastifyReply> => {
    // Set before the lookup settles: should it fail (the database down), the error answer carries them.
    scopeHeaders(reply)
    const session = await lookup
    if (session === null || hot.epoch !== hot.site.epoch || cache.peek(hot.key) !== file) return await resolve(request, reply, session)
    sendHot(request, reply, hot, file)
    return reply
  }

  /** The slow path: parse, find the app, check the session (unless already known), resolve on disk. */
  const resolve = async (request: FastifyRequest, reply: FastifyReply, known: AuthSession | null | undefined): Promise<FastifyReply> => {
    scopeHeaders(reply)
    const rawUrl = request.raw.url ?? '/'
    let session = known
    const target = parseAppUiUrl(rawUrl, prefixSegments)
    if (target.kind === 'bad') throw fastify.httpErrors.badRequest('Malformed URL')
    if (target.kind === 'none') return notFound(reply)
    const base = appBase(prefix, target.name, target.version)
    const query = target.query === '' ? '' : `?${target.query}`
    // Everything echoed back (login redirect, folder redirect) is rebuilt from checked parts.
    const below = (target.segments ?? []).map(encodeSegment).join('/')
    const wanted = base + below + (target.trailingSlash && below !== '' ? '/' : '') + query
    const found = siteFor(target.name, target.version)
    let site: Site | undefined
    if (typeof found === 'function') {
      // A published version is fetched and opened for a signed-in user only: nobody else makes
      // the node read the database or write its disk.
      if (session === undefined) session = await fastify.cookieSession(request, reply)
      if (session === null) return loginRedirect(reply, wanted)
      site = await found()
    } else {
      site = found
    }
    if (site === undefined) return notFound(reply)
    // A policy being read again or public/ being opened anew: answer from what comes of it.
    if (site.unsettled) await site.settled()
    site.dropPending()
    void reply.header('content-security-policy', site.csp)

    if (target.segments === null) return await reply.redirect(base + query, 301)
    if (target.dotSegment) throw fastify.httpErrors.forbidden('Dot files are never served')

    if (session === undefined) session = await fastify.cookieSession(request, reply)
    if (session === null) return loginRedirect(reply, wanted)

    // Hot paths are recorded in the epoch their resolution began in: a change during it makes them stale.
    const epoch = site.epoch
    const resolved = await site.folder.resolve(target.segments, target.trailingSlash)
    switch (resolved.kind) {
      case 'missing':
        return notFound(reply)
      case 'forbidden':
        throw fastify.httpErrors.forbidden('Not served')
      case 'folder':
        return await reply.redirect(`${base}${below}/${query}`, 301)
    }

    const head = request.method === 'HEAD'
    const html = isHtml(resolved.realPath)
    void reply.header('cache-control', CACHE_CONTROL)

    // From memory: files up to MAX_CACHED_FILE_BYTES, and pages of any size (a page is prepared
    // anyway, for its helper), provided what is prepared can stay: preparing a file, compression
    // included, is worth doing once, never for one request.
    if (cache.holds(preparedBytesBound(resolved.realPath, resolved.size)) && (html || resolved.size <= MAX_CACHED_FILE_BYTES)) {
      const key = cacheKey(resolved)
      const file = await cache.get(key, async () => {
        countPrepared()
        return await prepareFile(resolved.realPath, await fsp.readFile(resolved.realPath))
      })
      if (site.watches(resolved.realPath) && site.epoch === epoch && cache.peek(key) === file && !isHot(hotPaths.get(rawUrl), epoch, key)) {
        if (hotPaths.size >= MAX_HOT_PATHS) hotPaths.clear()
        const hot: HotPath = {
          site,
          epoch,
          key,
          headers: {
            identity: hotHeaders(site, file, undefined),
            br: file.br === undefined ? undefined : hotHeaders(site, file, 'br'),
            gzip: file.gzip === undefined ? undefined : hotHeaders(site, file, 'gzip')
          }
        }
        hotPaths.set(rawUrl, hot)
        sendHot(request, reply, hot, file)
        return reply
      }
      const encoding = chooseEncoding(request.headers['accept-encoding'], file)
      return sendVariant(request, reply, file, encoding, hotHeaders(site, file, encoding))
    }

    // Too large for memory: sent uncompressed from disk (a page with its helper injected), with a
    // validator from size and modification time (and, for a page, the helper it carries).
    const etag = `W/"${resolved.size.toString(16)}-${Math.floor(resolved.mtimeMs).toString(16)}${html ? `-${HELPER_SCRIPT_TAG}` : ''}"`
    void reply.header('content-type', contentTypeOf(resolved.realPath)).header('etag', etag)
    if (etagMatches(request.headers['if-none-match'], etag)) return await reply.code(304).send()
    void reply.header('content-length', String(resolved.size + (html ? HELPER_TAG_BYTES : 0)))
    if (head) return await reply.send('')
    return await reply.send(html ? injectHelper(await fsp.readFile(resolved.realPath)) : fs.createReadStream(resolved.realPath))
  }

  // HEAD declared here rather than derived by Fastify: the handler then answers it without reading
  // the body (no stream opened for a large file), with the Content-Length of the chosen variant.
  fastify.route({ method: ['GET', 'HEAD'], url: '/*', handler })
}

export default routes
