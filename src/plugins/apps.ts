import fp from 'fastify-plugin'
import { buildRegistry } from '../apps/registry.js'
import type { AppDefinition, AppRegistry, LoadedApp } from '../apps/types.js'

declare module 'fastify' {
  interface FastifyInstance {
    apps: AppRegistry
  }
}

export interface AppsPluginOptions {
  apps: AppDefinition[]
  loadFromDir: boolean
}

function fromDefinition (def: AppDefinition): LoadedApp {
  return {
    name: def.name,
    version: def.version,
    dir: def.dir,
    publicDir: def.publicDir,
    settings: Object.freeze({ ...(def.settings ?? {}) }),
    pollingReaktors: def.pollingReaktors ?? [],
    reaktors: def.reaktors ?? []
  }
}

/** Loads the apps (REAKTOR_APPS_DIR + those given in code) and indexes their registrations. */
export default fp<AppsPluginOptions>(async (fastify, opts) => {
  // TODO(loader): apps from fastify.config.reaktorAppsDir when opts.loadFromDir.
  const loaded: LoadedApp[] = opts.apps.map(fromDefinition)
  fastify.decorate('apps', buildRegistry(loaded, fastify.log))
}, { name: 'apps', dependencies: ['config'] })
