import fp from 'fastify-plugin'
import { Gauge } from 'prom-client'
import { Scheduler, type SchedulerOptions } from '../scheduler/index.js'

declare module 'fastify' {
  interface FastifyInstance {
    scheduler: Scheduler
  }
}

/** Knobs tests may turn (the production values are the defaults). */
export type SchedulerOverrides = Partial<Pick<SchedulerOptions,
  'minIntervalMs' | 'now' | 'reconcileIntervalMs' | 'flushIntervalMs' | 'lockCheckMaxAgeMs' |
  'lockQueryTimeoutMs' | 'reconnectMinMs' | 'reconnectMaxMs' | 'shutdownGraceMs' | 'wantsOwnership' |
  'coldStartSettleMs' | 'reconcileHook'>>

export interface SchedulerPluginOptions {
  overrides?: SchedulerOverrides
}

/**
 * Wires the scheduler into the app: created with this node's registrations, started once the
 * app is ready, stopped on close, and its runs counted in the metrics.
 *
 * Shutdown: Fastify runs preClose hooks before it waits for in-flight HTTP requests, onClose hooks
 * after. So preClose stops the scheduling at once (no run starts while HTTP drains, in-flight runs
 * are aborted and the grace period starts) and begins the rest (await runs, flush, release locks)
 * in the background; onClose awaits it. onClose hooks run in reverse registration order, so that
 * completes before the db plugin destroys the pool.
 */
export default fp<SchedulerPluginOptions>(async (fastify, opts) => {
  const { pollingRuns, pollingRunSeconds, registry } = fastify.metrics
  const scheduler = new Scheduler({
    db: fastify.db,
    databaseUrl: fastify.databaseUrl,
    reaktors: fastify.apps.pollingReaktors,
    nodeId: fastify.config.nodeId,
    log: fastify.log,
    shutdownGraceMs: fastify.config.shutdownGraceMs,
    onRunEnd: ({ reaktorId, outcome, durationMs }) => {
      pollingRuns.inc({ reaktor: reaktorId, outcome })
      pollingRunSeconds.observe({ reaktor: reaktorId }, durationMs / 1000)
    },
    ...opts.overrides
  })
  fastify.decorate('scheduler', scheduler)

  // The fair-share arithmetic of the last reconcile pass, read at scrape time.
  const gauge = (name: string, help: string, read: () => number): Gauge => new Gauge({
    name, help, registers: [registry], collect () { this.set(read()) }
  })
  gauge('reaktor_polling_cluster_members', 'Live nodes of the cluster, as this node last saw them', () => scheduler.ownershipShare.members)
  gauge('reaktor_polling_fair_share', 'Running polling reaktors this node takes at most: ceil(running / members)', () => scheduler.ownershipShare.share)

  fastify.addHook('onReady', async () => {
    await scheduler.start()
  })
  fastify.addHook('preClose', async () => {
    scheduler.stopScheduling()
    scheduler.stop().catch((err) => fastify.log.error({ err }, 'scheduler shutdown failed'))
  })
  fastify.addHook('onClose', async () => {
    await scheduler.stop()
  })
}, { name: 'scheduler', dependencies: ['config', 'db', 'apps', 'metrics'] })
