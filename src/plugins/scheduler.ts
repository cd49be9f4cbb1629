import fp from 'fastify-plugin'
import { PollingRunMetrics } from '../metrics/polling-runs.js'
import { scrapeCounter, scrapeGauge } from '../metrics/read-at-scrape.js'
import { ReaktorStateMetrics } from '../metrics/reaktor-state.js'
import { Scheduler, type SchedulerOptions } from '../scheduler/index.js'

declare module 'fastify' {
  interface FastifyInstance {
    scheduler: Scheduler
  }
}

/**
 * What this plugin supplies from the app; every other option (shutdownGraceMs too, which comes from
 * the config) is a knob tests may turn: the defaults are production's.
 */
type Supplied = 'db' | 'bulkDb' | 'databaseUrl' | 'reaktors' | 'nodeId' | 'log' | 'partitions' | 'onRunEnd' | 'auditWriter' | 'advertisedIds'
export type SchedulerOverrides = Partial<Omit<SchedulerOptions, Supplied>>

export interface SchedulerPluginOptions {
  overrides?: SchedulerOverrides
}

/**
 * Wires the scheduler into the app: created with this node's registrations, started once the
 * app is ready, stopped on close; its runs, ownership and refusals in the metrics.
 *
 * Shutdown: Fastify runs preClose hooks before it waits for in-flight HTTP requests, onClose hooks
 * after. So preClose stops the scheduling at once (no run starts while HTTP drains, in-flight runs
 * are aborted and the grace period starts) and begins the rest (await runs, flush, release locks)
 * in the background; onClose awaits it. onClose hooks run in reverse registration order, so that
 * completes before the db plugin destroys the pool.
 */
export default fp<SchedulerPluginOptions>(async (fastify, opts) => {
  const { registry } = fastify.metrics
  // Runs by reaktor and outcome, and their durations (compact: per-reaktor numbers, rendered at scrape).
  const pollingRuns = new PollingRunMetrics()
  pollingRuns.register(registry)
  const scheduler = new Scheduler({
    db: fastify.db,
    bulkDb: fastify.bulkDb,
    databaseUrl: fastify.databaseUrl,
    reaktors: fastify.apps.pollingReaktors,
    nodeId: fastify.config.nodeId,
    log: fastify.log,
    shutdownGraceMs: fastify.config.shutdownGraceMs,
    partitions: fastify.config.partitions,
    runHistoryPerReaktor: fastify.config.runHistoryPerReaktor,
    auditWriter: fastify.auditWriter,
    // A node that could not load an app's active version runs the one it had, and says so: the
    // nodes that run the active version are preferred for its reaktors.
    advertisedIds: () => {
      const stale = fastify.publishedApps.stale()
      return [...fastify.apps.pollingReaktors].filter(([, r]) => !stale.has(r.app.name)).map(([id]) => id)
    },
    onRunEnd: ({ reaktorId, outcome, durationMs }) => {
      pollingRuns.record(reaktorId, outcome, durationMs / 1000)
    },
    ...opts.overrides
  })
  fastify.decorate('scheduler', scheduler)
  // Its writes are idempotent: a switch the database could not take is applied again a second later.
  const switched = async (change: Parameters<typeof scheduler.registrationsChanged>[0], attempt = 1): Promise<void> => {
    try {
      await scheduler.registrationsChanged(change)
    } catch (err) {
      fastify.log.warn({ err, attempt }, 'the scheduler could not take in an app switch; trying again in a second')
      setTimeout(() => { void switched(change, attempt + 1) }, 1000).unref()
    }
  }
  fastify.appCatalog.onChange(async (change) => { await switched(change) })

  // Ownership as of the last reconcile pass, read at scrape time.
  const gauge = (name: string, help: string, read: () => number): void => scrapeGauge(registry, name, help, read)
  gauge('reaktor_polling_owned', 'Running polling reaktors owned (run) by this node', () => scheduler.ownedCount)
  gauge('reaktor_polling_cluster_members', 'Live nodes of the cluster, as this node last saw them', () => scheduler.ownershipShare.members)
  gauge('reaktor_polling_fair_share', 'Running polling reaktors this node takes at most: ceil(running / members)', () => scheduler.ownershipShare.share)
  gauge('reaktor_polling_partitions', 'Partitions of the cluster', () => scheduler.partitions)
  gauge('reaktor_polling_partitions_held', 'Partitions whose advisory lock this node holds', () => scheduler.heldPartitions().length)
  gauge('reaktor_polling_lock_refused', '1 while PostgreSQL refuses this node advisory locks or an earlier-version node shares the database, else 0',
    () => scheduler.problem === undefined ? 0 : 1)
  scrapeCounter(registry, 'reaktor_polling_lock_refusals_total',
    'Times PostgreSQL refused this node an advisory lock (shared lock table full: raise max_locks_per_transaction)', () => scheduler.lockRefusals)
  // Per reaktor, from the stored rows of the partitions this node holds: one node exports each.
  new ReaktorStateMetrics({ db: fastify.db, heldPartitions: () => scheduler.heldPartitions(), partitionOf: (id) => scheduler.partitionOfReaktor(id) }).register(registry)

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
}, { name: 'scheduler', dependencies: ['config', 'db', 'apps', 'metrics', 'audit'] })
