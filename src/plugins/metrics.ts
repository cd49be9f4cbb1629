import fp from 'fastify-plugin'
import { collectDefaultMetrics, Histogram, Registry } from 'prom-client'

declare module 'fastify' {
  interface FastifyInstance {
    metrics: ServiceMetrics
  }
}

export interface ServiceMetrics {
  /** The plugin that owns some data registers its metrics here (polling runs: the scheduler plugin). */
  registry: Registry
}

/**
 * Prometheus metrics at `GET /metrics`: the registry, process metrics and HTTP requests. Every other
 * metric is registered by the plugin that owns its data. One registry per app instance, so several
 * instances in one process (tests) never collide.
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
  fastify.decorate('metrics', { registry })

  // On every response: the labelled child of each (method, route, status) is looked up once and
  // kept, so a request neither builds a label object nor hashes it (prom-client's observe(labels)
  // sorts and joins the label values on every call). A callback hook: no promise per request.
  const children = new Map<string, Map<number, { observe: (seconds: number) => void }>>()
  fastify.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched'
    const key = request.method + ' ' + route
    let byStatus = children.get(key)
    if (byStatus === undefined) {
      byStatus = new Map()
      children.set(key, byStatus)
    }
    const status = reply.statusCode
    let child = byStatus.get(status)
    if (child === undefined) {
      child = httpSeconds.labels({ method: request.method, route, status_code: String(status) })
      byStatus.set(status, child)
    }
    child.observe(reply.elapsedTime / 1000)
    done()
  })

  fastify.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    void reply.header('content-type', registry.contentType)
    return await registry.metrics()
  })
}, { name: 'metrics', dependencies: ['config'] })
