/**
 * The load generator, in its own process (never sharing an event loop with a server under test).
 * Given options as JSON in argv[2], it runs autocannon once and prints ONE line of JSON with the
 * figures; forked by run.ts without arguments, it runs each `load` request it is sent.
 */
import autocannon from 'autocannon'
import { serveParent } from './lib.js'

export interface LoadOptions {
  url: string
  method?: 'GET' | 'POST'
  headers?: Record<string, string>
  body?: string
  connections: number
  /** Seconds. */
  duration: number
  pipelining?: number
}

export interface LoadResult {
  requestsPerSecond: number
  latencyP50: number
  latencyP99: number
  throughputMBps: number
  total: number
  non2xx: number
  errors: number
  timeouts: number
}

async function load (opts: LoadOptions): Promise<LoadResult> {
  if (!new URL(opts.url).hostname.startsWith('127.')) throw new Error('the load generator only targets 127.0.0.1')
  const result = await autocannon({
    url: opts.url,
    method: opts.method ?? 'GET',
    headers: opts.headers,
    body: opts.body,
    connections: opts.connections,
    duration: opts.duration,
    pipelining: opts.pipelining ?? 1
  })
  return {
    requestsPerSecond: result.requests.average,
    latencyP50: result.latency.p50,
    latencyP99: result.latency.p99,
    throughputMBps: result.throughput.average / 1024 / 1024,
    total: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts
  }
}

if (process.argv[2] !== undefined) {
  // One shot: `node --import tsx bench/load.ts '{"url":...}'` prints the figures.
  process.stdout.write(JSON.stringify(await load(JSON.parse(process.argv[2]) as LoadOptions)) + '\n')
} else {
  // Driven by run.ts: one child for the whole run, each load a request (saves a start-up per load).
  serveParent({ load: async (msg) => await load(msg.options as LoadOptions) }, async () => {})
  process.send?.({ type: 'ready' })
}
