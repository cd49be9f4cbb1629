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

/**
 * The Kysely instance over a pg pool whose statements are bounded (src/db/index.ts); migrations
 * run before the app is ready, on a connection of their own without those bounds: one may wait for
 * another node's migration lock, or take long on a large table.
 */
export default fp<DbPluginOptions>(async (fastify, opts) => {
  const applicationName = `reaktor-service ${fastify.config.nodeId}`
  const migrations = createDatabase(opts.databaseUrl, { max: 1, applicationName, bounded: false })
  try {
    await migrateToLatest(migrations.db)
  } finally {
    await migrations.db.destroy()
  }
  const handle = createDatabase(opts.databaseUrl, { applicationName })
  fastify.decorate('db', handle.db)
  fastify.decorate('databaseUrl', opts.databaseUrl)
  fastify.addHook('onClose', async () => {
    await handle.db.destroy()
  })
}, { name: 'db', dependencies: ['config'] })
