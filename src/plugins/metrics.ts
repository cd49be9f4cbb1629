import fp from 'fastify-plugin'
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'

declare module 'fastify' {
  interface FastifyInstance {
    metrics: ServiceMetrics
  }
}

export interface ServiceMetrics {
  registry: Registry
  pollingRuns: Counter<'reaktor' | 'outcome'>
  pollingRunSeconds: Histogram<'reaktor'>
}

/**
 * Prometheus metrics at `GET /metrics`: process metrics, HTTP requests, and polling reaktor runs.
 * One registry per app instance, so several instances in one process (tests) never collide.
 */
export default fp(async (fastify) => {
  const registry = new Registry()
  registry.setDefaultLabels({ node: fastify.config.nodeId })
  collectDefaultMetrics({ register: registry })

  const httpSeconds = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP requests by route and status',
    labelNames: ['method', 'route', 'status_code'] as const,
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
    registers: [registry]
  })
  const pollingRuns = new Counter({
    name: 'reaktor_polling_runs_total',
    help: 'Finished polling reaktor runs on this node, by outcome (more_work, no_work, failed)',
    labelNames: ['reaktor', 'outcome'] as const,
    registers: [registry]
  })
  const pollingRunSeconds = new Histogram({
    name: 'reaktor_polling_run_duration_seconds',
    help: 'Duration of polling reaktor runs on this node',
    labelNames: ['reaktor'] as const,
    buckets: [0.001, 0.01, 0.1, 1, 10, 60, 300],
    registers: [registry]
  })
  // Read at scrape time; the scheduler is decorated after this plugin, hence the lookup then.
  const owned = new Gauge({
    name: 'reaktor_polling_owned',
    help: 'Running polling reaktors owned (run) by this node',
    registers: [registry],
    collect () {
      if (fastify.hasDecorator('scheduler')) this.set(fastify.scheduler.ownedReaktorIds().length)
    }
  })
  void owned

  fastify.decorate('metrics', { registry, pollingRuns, pollingRunSeconds })

  fastify.addHook('onResponse', async (request, reply) => {
    httpSeconds.observe({
      method: request.method,
      route: request.routeOptions.url ?? 'unmatched',
      status_code: String(reply.statusCode)
    }, reply.elapsedTime / 1000)
  })

  fastify.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    void reply.header('content-type', registry.contentType)
    return await registry.metrics()
  })
}, { name: 'metrics', dependencies: ['config'] })
