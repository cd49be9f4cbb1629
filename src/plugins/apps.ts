import fp from 'fastify-plugin'
import type { AppDefinition, AppRegistry } from '../apps/types.js'

declare module 'fastify' {
  interface FastifyInstance {
    apps: AppRegistry
  }
}

export interface AppsPluginOptions {
  apps: AppDefinition[]
  loadFromDir: boolean
}

// STUB: the app loader (src/apps/loader.ts) fills this in.
export default fp<AppsPluginOptions>(async (fastify) => {
  fastify.decorate('apps', { apps: [], findApp: () => undefined, pollingReaktors: new Map(), reaktors: new Map() })
}, { name: 'apps', dependencies: ['config'] })
