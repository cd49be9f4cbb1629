import fp from 'fastify-plugin'
import { scrapeCounter } from '../metrics/read-at-scrape.js'
import { PollingReads, type CachedAnswer } from '../polling/reads.js'
import { StatusCache } from '../polling/status-cache.js'
import { isChange, type ControlAction, type ControlOutcome } from '../scheduler/index.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** The read side of polling (status and list, cached as right as a read per request), start/stop and run now. */
    polling: Polling
  }
}

export interface Polling {
  reads: PollingReads
  /** Writes the start (the change is durable before this resolves); false when it was already running. */
  start: (reaktorId: string) => Promise<boolean>
  /** Writes the stop; false when it was already stopped. */
  stop: (reaktorId: string) => Promise<boolean>
  /** Starts or stops many in one transaction, per id in the order given; unknown ids are `not_found`, written nowhere. */
  bulk: (action: ControlAction, reaktorIds: readonly string[]) => Promise<ControlOutcome[]>
  /** Writes a run request that the owner acts on (docs/operating.md "Run now"); false when it is stopped. */
  run: (reaktorId: string) => Promise<boolean>
}

/**
 * Polling as the API sees it: the status cache and its LISTEN connection (one per app instance,
 * closed with the app), the reads built on it, and start/stop/run now through the scheduler.
 */
export default fp(async (fastify) => {
  const { scheduler } = fastify
  const cache = new StatusCache<CachedAnswer>({ url: fastify.databaseUrl, applicationName: `reaktor-status ${fastify.config.nodeId}`.slice(0, 63), log: fastify.log })
  await cache.start()
  fastify.addHook('onClose', async () => { await cache.stop() })
  const reads = new PollingReads({ db: fastify.db, reaktors: fastify.apps.pollingReaktors, minIntervalMs: scheduler.minIntervalMs }, cache)

  // A switch of app version changes what is registered here: the list, and the status of each id it touched.
  fastify.appCatalog.onChange(async (change) => {
    for (const id of [...change.added, ...change.changed, ...change.removed]) reads.changed(id)
  })

  const { registry } = fastify.metrics
  scrapeCounter(registry, 'reaktor_status_cache_hits_total', 'Polling status and list answers served from memory', () => reads.hits)
  scrapeCounter(registry, 'reaktor_status_cache_reads_total', 'Database reads behind polling status and list answers (one per coalesced read, shared by the requests of one turn)', () => reads.reads)

  // Written (and awaited) before the answer: a crash after the 200 never loses the change. The
  // NOTIFY drops the cached answers on every node; here at once for this one.
  const control = (apply: (id: string) => Promise<boolean>) => async (reaktorId: string): Promise<boolean> => {
    const changed = await apply(reaktorId)
    reads.changed(reaktorId)
    return changed
  }
  fastify.decorate('polling', {
    reads,
    start: control(async (id) => await scheduler.startReaktor(id)),
    stop: control(async (id) => await scheduler.stopReaktor(id)),
    bulk: async (action, reaktorIds) => {
      const outcomes = await scheduler.controlReaktors(action, reaktorIds)
      for (const o of outcomes) if (isChange(o.result)) reads.changed(o.reaktorId)
      return outcomes
    },
    // Its next run moved: dropped here at once, elsewhere at most the cache's age later.
    run: control(async (id) => await scheduler.runReaktor(id))
  })
}, { name: 'polling', dependencies: ['config', 'db', 'apps', 'metrics', 'scheduler'] })
