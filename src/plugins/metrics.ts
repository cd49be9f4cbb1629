import fp from 'fastify-plugin'
import { collectDefaultMetrics, Registry, type Metric } from 'prom-client'
import { bucketOf, pushHistogram, type Sample } from '../metrics/histogram.js'

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

  const httpSeconds = new RequestDurations()
  registry.registerMetric(httpSeconds as unknown as Metric)
  fastify.decorate('metrics', { registry })

  // On every response: two map lookups and three increments (a callback hook: no promise). The
  // histogram is put together when Prometheus scrapes, not per request.
  fastify.addHook('onResponse', (request, reply, done) => {
    httpSeconds.observe(request.method, request.routeOptions.url ?? 'unmatched', reply.statusCode, reply.elapsedTime / 1000)
    done()
  })

  fastify.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    void reply.header('content-type', registry.contentType)
    return await registry.metrics()
  })
}, { name: 'metrics', dependencies: ['config'] })

const BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5]

/** One (method, route, status) of the request histogram: counts per bucket (not cumulative). */
interface Series { method: string, route: string, status: string, buckets: Float64Array, sum: number, count: number }

/**
 * `http_request_duration_seconds`, a Prometheus histogram by method, route and status, written as
 * prom-client's Histogram writes it. prom-client's own observe() builds, checks and hashes a label
 * object on every call, a cost every request paid; here a request finds its series in two maps and
 * counts into it.
 */
class RequestDurations {
  readonly name = 'http_request_duration_seconds'
  readonly help = 'HTTP requests by route and status'
  readonly type = 'histogram'
  readonly aggregator = 'sum'
  /** By route, method and status: no key is built per request (a route's string is the same each time). */
  private readonly series = new Map<string, Map<string, Map<number, Series>>>()
  private readonly order: Series[] = []

  observe (method: string, route: string, statusCode: number, seconds: number): void {
    let byMethod = this.series.get(route)
    if (byMethod === undefined) {
      byMethod = new Map()
      this.series.set(route, byMethod)
    }
    let byStatus = byMethod.get(method)
    if (byStatus === undefined) {
      byStatus = new Map()
      byMethod.set(method, byStatus)
    }
    let series = byStatus.get(statusCode)
    if (series === undefined) {
      series = { method, route, status: String(statusCode), buckets: new Float64Array(BUCKETS.length), sum: 0, count: 0 }
      byStatus.set(statusCode, series)
      this.order.push(series)
    }
    const i = bucketOf(BUCKETS, seconds)
    if (i < BUCKETS.length) series.buckets[i]++
    series.sum += seconds
    series.count++
  }

  /** For the text format (what the registry prints): prom-client's shape, the series' labels shared by each value. */
  async getForPromString (): Promise<{ name: string, help: string, type: string, aggregator: string, values: Sample[] }> {
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: this.values((le, labels) => ({ labels: le === undefined ? {} : { le } as Record<string, string | number>, sharedLabels: labels })) }
  }

  /** For getMetricsAsJSON and aggregation: every label on each value, as prom-client's get() gives them. */
  async get (): Promise<{ name: string, help: string, type: string, aggregator: string, values: Sample[] }> {
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: this.values((le, labels) => ({ labels: le === undefined ? { ...labels } : { le, ...labels } })) }
  }

  /** Cumulative buckets, then +Inf, sum and count, per series in the order they were first seen. */
  private values (label: (le: number | string | undefined, labels: Record<string, string>) => Pick<Sample, 'labels' | 'sharedLabels'>): Sample[] {
    const values: Sample[] = []
    for (const s of this.order) {
      const labels = { method: s.method, route: s.route, status_code: s.status }
      pushHistogram(values, this.name, BUCKETS, s.buckets, 0, s, (le) => label(le, labels))
    }
    return values
  }

  reset (): void {
    this.series.clear()
    this.order.length = 0
  }
}
