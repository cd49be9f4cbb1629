import fs from 'node:fs/promises'
import path from 'node:path'
import type { FastifyPluginAsync } from 'fastify'
import { isPackageVersion } from '../apps/loader.js'
import type { LoadedApp } from '../apps/types.js'
import { FileCache } from '../app-ui/file-cache.js'
import { Site } from '../app-ui/site.js'
import { scrapeCounter, scrapeGauge } from '../metrics/read-at-scrape.js'
import appUiRoutes from '../routes/app-ui.js'

/**
 * The scope of the apps' static UIs under `/app-ui/<name>@<version>/`: the file cache, one site
 * (watched public/ folder, Content-Security-Policy) per public/ folder, their metrics, and the
 * route that answers from them (src/routes/app-ui.ts).
 *
 * Registered WITHOUT fastify-plugin on purpose: what it and its route set stays inside this scope
 * and never reaches the API routes.
 */
const appUi: FastifyPluginAsync = async (fastify) => {
  // APP_UI_CACHE_BYTES: memory for cached files and their compressed variants.
  const cache = new FileCache(fastify.config.appUiCacheBytes)
  // Preparing a file (reading, injecting, hashing, compressing) is the costly part; a count that
  // keeps rising under a steady set of pages means the cache is too small for them.
  let prepared = 0
  scrapeCounter(fastify.metrics.registry, 'reaktor_app_ui_files_prepared_total', 'App-UI files read and prepared (token helper, ETag, compressed variants)', () => prepared)
  scrapeGauge(fastify.metrics.registry, 'reaktor_app_ui_cache_bytes', 'Memory held by cached app-UI files and their compressed variants', () => cache.bytes)

  // One site (one watch, one policy) per public/ path, whichever apps share it. Not per real
  // path: a public/ that is a link may be flipped to another folder for one app and not another.
  const appsByDir = new Map<string, LoadedApp[]>()
  // Published versions are opened on demand (below), whichever is active.
  for (const app of fastify.apps.apps.filter((a) => !fastify.publishedApps.states.has(a.name))) {
    if (app.publicDir === undefined) continue
    const dir = path.resolve(app.publicDir)
    const shared = appsByDir.get(dir)
    if (shared === undefined) appsByDir.set(dir, [app])
    else shared.push(app)
  }
  /** The sites of the apps loaded at start, by `name@version`. */
  const fixed = new Map<string, Site>()
  /** Each site once (apps sharing a public/ share its site). */
  const eachSite = (): Site[] => [...new Set(fixed.values())]
  // Paths are checked on disk once and memoised while their folder is watched: a rate close to
  // the request rate means changes are not watched (see the warning logged then).
  scrapeCounter(fastify.metrics.registry, 'reaktor_app_ui_path_checks_total', 'App-UI request paths checked on disk (realpath and stat) rather than answered from memory',
    () => eachSite().reduce((sum, site) => sum + site.pathChecks, 0))
  fastify.addHook('onClose', async () => {
    await Promise.all(eachSite().map(async (site) => { await site.close() }))
  })
  for (const [dir, apps] of appsByDir) {
    const label = apps.map((app) => `${app.name}@${app.version}`).join(', ')
    let site: Site
    try {
      site = await Site.open(dir, label, cache, fastify.log)
    } catch (err) {
      fastify.log.warn({ app: label, err }, `app ${label}: public/ folder ${dir} is unusable; its UI is not served`)
      continue
    }
    for (const app of apps) fixed.set(`${app.name}@${app.version}`, site)
  }

  const published = new Map<string, Promise<Site | undefined>>()
  fastify.addHook('onClose', async () => {
    await Promise.all([...published.values()].map(async (opening) => { await (await opening)?.close() }))
  })
  const openPublished = async (name: string, version: string): Promise<Site | undefined> => {
    const dir = await fastify.packageFolders.ensure(name, version).catch((err: unknown) => {
      fastify.log.warn({ err, app: `${name}@${version}` }, `app ${name}@${version}: its package could not be fetched; its UI is not served`)
      return undefined
    })
    const publicDir = dir === undefined ? undefined : path.join(dir, 'public')
    if (publicDir === undefined || !(await fs.stat(publicDir).then((st) => st.isDirectory(), () => false))) return undefined
    return await Site.open(publicDir, `${name}@${version}`, cache, fastify.log).catch(() => undefined)
  }
  /**
   * Every stored version of a published app is served at its own path until it is deleted, so open
   * pages keep working across a publish; only its files are read (no code is imported for it).
   */
  const siteFor = (name: string, version: string): Site | undefined | (() => Promise<Site | undefined>) => {
    const key = `${name}@${version}`
    const site = fixed.get(key)
    if (site !== undefined) return site
    // Only apps published and active in the cluster (as this node last heard), and names a
    // package may have: a request naming anything else costs no database read.
    if (!fastify.publishedApps.states.has(name) || !isPackageVersion(version)) return undefined
    return async () => await openCached(key, name, version)
  }
  const openCached = async (key: string, name: string, version: string): Promise<Site | undefined> => {
    let opening = published.get(key)
    if (opening === undefined) {
      opening = openPublished(name, version)
      published.set(key, opening)
      // A miss is not remembered for long: a version published meanwhile is served.
      void opening.then((opened) => {
        if (opened === undefined) setTimeout(() => { if (published.get(key) === opening) published.delete(key) }, 1000).unref()
      })
    }
    return opening
  }
  // A change of an app anywhere (a version deleted, say): its published sites are opened afresh on their next request.
  fastify.publishedApps.onNotified((name) => {
    for (const [key, opening] of published) {
      if (name !== undefined && !key.startsWith(`${name}@`)) continue
      published.delete(key)
      void opening.then(async (opened) => { await opened?.close() })
    }
  })

  await fastify.register(appUiRoutes, { cache, siteFor, countPrepared: () => { prepared++ } })
}

export default appUi
