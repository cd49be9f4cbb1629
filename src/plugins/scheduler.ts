import fp from 'fastify-plugin'
import { Scheduler, type SchedulerOptions } from '../scheduler/index.js'

declare module 'fastify' {
  interface FastifyInstance {
    scheduler: Scheduler
  }
}

/** Knobs tests may turn (the production values are the defaults). */
export type SchedulerOverrides = Partial<Pick<SchedulerOptions,
  'minIntervalMs' | 'now' | 'reconcileIntervalMs' | 'flushIntervalMs' | 'lockCheckMaxAgeMs' |
  'lockQueryTimeoutMs' | 'reconnectMinMs' | 'reconnectMaxMs' | 'shutdownGraceMs' | 'wantsOwnership'>>

export interface SchedulerPluginOptions {
  overrides?: SchedulerOverrides
}

/**
 * Wires the scheduler into the app: created with this node's registrations, started once the
 * app is ready, stopped on close. onClose hooks run in reverse registration order, so it stops
 * (flushes, releases its locks) before the db plugin destroys the pool.
 */
export default fp<SchedulerPluginOptions>(async (fastify, opts) => {
  const scheduler = new Scheduler({
    db: fastify.db,
    databaseUrl: fastify.databaseUrl,
    reaktors: fastify.apps.pollingReaktors,
    nodeId: fastify.config.nodeId,
    log: fastify.log,
    shutdownGraceMs: fastify.config.shutdownGraceMs,
    ...opts.overrides
  })
  fastify.decorate('scheduler', scheduler)
  fastify.addHook('onReady', async () => {
    await scheduler.start()
  })
  fastify.addHook('onClose', async () => {
    await scheduler.stop()
  })
}, { name: 'scheduler', dependencies: ['config', 'db', 'apps'] })
