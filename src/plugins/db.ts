import fp from 'fastify-plugin'
import type { Kysely } from 'kysely'
import { createDatabase } from '../db/index.js'
import { migrateToLatest } from '../db/migrate.js'
import type { Database } from '../db/schema.js'

declare module 'fastify' {
  interface FastifyInstance {
    db: Kysely<Database>
    /** For dedicated connections (the scheduler's lock connection, LISTEN). */
    databaseUrl: string
  }
}

export interface DbPluginOptions {
  databaseUrl: string
}

/** The Kysely instance over a pg pool; migrations run before the app is ready. */
export default fp<DbPluginOptions>(async (fastify, opts) => {
  const handle = createDatabase(opts.databaseUrl, { applicationName: `reaktor-service ${fastify.config.nodeId}` })
  fastify.decorate('db', handle.db)
  fastify.decorate('databaseUrl', opts.databaseUrl)
  fastify.addHook('onClose', async () => {
    await handle.db.destroy()
  })
  await migrateToLatest(handle.db)
}, { name: 'db', dependencies: ['config'] })
