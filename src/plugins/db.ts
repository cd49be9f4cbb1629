import fp from 'fastify-plugin'
import type { Kysely } from 'kysely'
import { createDatabase } from '../db/index.js'
import { migrateToLatest } from '../db/migrate.js'
import type { Database } from '../db/schema.js'

declare module 'fastify' {
  interface FastifyInstance {
    db: Kysely<Database>
    /** One connection without the statement bounds: migrations and the scheduler's boot rules. */
    bulkDb: Kysely<Database>
    /** For dedicated connections (the scheduler's lock connection, LISTEN). */
    databaseUrl: string
  }
}

export interface DbPluginOptions {
  databaseUrl: string
}

/**
 * The Kysely instance over a pg pool whose statements are bounded (src/db/index.ts), and one
 * connection without those bounds for the few statements that may rightly take long: migrations
 * (one may wait for another node's migration lock) and the scheduler's boot rules. Its connection
 * closes when idle (pg-pool's 10 s); migrations run before the app is ready.
 */
export default fp<DbPluginOptions>(async (fastify, opts) => {
  const applicationName = `reaktor-service ${fastify.config.nodeId}`
  const bulk = createDatabase(opts.databaseUrl, { max: 1, applicationName, bounded: false })
  const handle = createDatabase(opts.databaseUrl, { applicationName })
  fastify.decorate('db', handle.db)
  fastify.decorate('bulkDb', bulk.db)
  fastify.decorate('databaseUrl', opts.databaseUrl)
  fastify.addHook('onClose', async () => {
    await Promise.all([handle.db.destroy(), bulk.db.destroy()])
  })
  await migrateToLatest(bulk.db)
}, { name: 'db', dependencies: ['config'] })
