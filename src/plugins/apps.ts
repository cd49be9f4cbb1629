import fp from 'fastify-plugin'
import { loadApp, loadAppsFromDir } from '../apps/loader.js'
import { shippedFolders } from '../apps/shipped.js'
import path from 'node:path'
import { AppCatalog } from '../apps/catalog.js'
import { PackageFolders } from '../apps/package-folders.js'
import { PublishedApps } from '../apps/published.js'
import { resolveSettings, warnUnknownSettingVariables } from '../apps/settings.js'
import { scrapeGauge } from '../metrics/read-at-scrape.js'
import type { AppDefinition, AppRegistry, LoadedApp } from '../apps/types.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** What this node runs; its maps are live (they change when an app switches versions). */
    apps: AppRegistry
    appCatalog: AppCatalog
    /** Published apps: the versions this node runs, kept on the active ones. */
    publishedApps: PublishedApps
    /** Published packages unpacked on this node (DATA_DIR/apps). */
    packageFolders: PackageFolders
  }
}

export interface AppsPluginOptions {
  apps: AppDefinition[]
  loadFromDir: boolean
}

type Env = Record<string, string | undefined>

/** An app given in code; its settings follow the same environment override rule as a folder's. */
function fromDefinition (def: AppDefinition, env: Env): LoadedApp {
  const label = `app ${def.name}@${def.version}`
  return {
    name: def.name,
    version: def.version,
    dir: def.dir,
    publicDir: def.publicDir,
    settings: typeof def.name === 'string' ? resolveSettings(label, def.name, def.settings ?? {}, env) : Object.freeze({ ...def.settings }),
    pollingReaktors: def.pollingReaktors ?? [],
    reaktors: def.reaktors ?? []
  }
}

/** Loads the apps (REAKTOR_APPS_DIR, then those given in code) and indexes their registrations. */
export default fp<AppsPluginOptions>(async (fastify, opts) => {
  const env = fastify.config.appSettingsEnv
  const inCode = opts.apps.map((def) => fromDefinition(def, env))
  let fromDir: LoadedApp[] = []
  if (opts.loadFromDir) fromDir = await loadAppsFromDir(fastify.config.reaktorAppsDir, env, fastify.log, inCode)
  else warnUnknownSettingVariables(inCode, env, fastify.log)
  // The console (and, when asked, the examples) ship with the service: loaded whatever
  // REAKTOR_APPS_DIR holds, unless an app of the same name is loaded from there or given in code.
  const shipped: LoadedApp[] = []
  const { config } = fastify
  for (const folder of await shippedFolders({ appsDir: config.reaktorAppsDir, console: config.consoleApp, examples: config.exampleApps })) {
    const app = await loadApp(folder, env, fastify.log)
    if (![...fromDir, ...inCode].some((other) => other.name === app.name)) shipped.push(app)
  }
  const loaded: LoadedApp[] = [...fromDir, ...shipped, ...inCode]
  const catalog = new AppCatalog(loaded, fastify.log)
  fastify.decorate('appCatalog', catalog)
  fastify.decorate('apps', catalog.registry)

  // Published apps load before the scheduler is made: its boot rules then cover their reaktors.
  const folders = new PackageFolders(path.join(fastify.config.dataDir, 'apps'), fastify.db, fastify.config.packageLimits)
  // Named without their paths: node states are shown to every signed-in user.
  const fixedApps = new Map(loaded.map((a) => [a.name, a.dir === undefined ? 'the apps given in code' : 'REAKTOR_APPS_DIR']))
  const published = new PublishedApps({ db: fastify.db, databaseUrl: fastify.databaseUrl, nodeId: fastify.config.nodeId, folders, catalog, fixedApps, env, log: fastify.log })
  await published.start()
  fastify.addHook('onClose', async () => { await published.stop() })
  scrapeGauge(fastify.metrics.registry, 'reaktor_published_apps_failing', 'Published apps whose active version this node could not load (it runs the previous one, or none): GET /api/v1/apps/{name} says why',
    () => [...published.states.values()].filter((s) => s.failed !== undefined).length)
  fastify.decorate('packageFolders', folders)
  fastify.decorate('publishedApps', published)
}, { name: 'apps', dependencies: ['config', 'db', 'metrics'] })
