/**
 * An HTTP server under test, in its own process. argv[2]: `service` (the whole service, built as
 * src/server.ts builds it) or `bare` (a bare Fastify, the Node ceiling of each scenario: routes
 * sending the service's exact bytes and headers from memory (the app-UI files and the status, which
 * the service too answers from cached bytes), the list through the service's own response schema,
 * an echo route; and @fastify/static on a copy of the same bytes, for context). argv[3]: JSON
 * options.
 */
import Fastify, { type FastifyInstance } from 'fastify'
import fastifyStatic from '@fastify/static'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config.js'
import { SHARED_SCHEMAS } from '../src/schemas/components.js'
import { PollingList } from '../src/schemas/polling.js'
import { ADMIN, httpApp } from './fixture.js'
import { fatal, serveParent } from './lib.js'

interface Options {
  publicDir: string
  databaseUrl?: string
  dataDir?: string
}

const kind = process.argv[2]
const opts = JSON.parse(process.argv[3]) as Options

async function service (): Promise<FastifyInstance> {
  const config = loadConfig({
    // Request logging (info) is off in the benchmark, as the bare servers have no logger at all.
    LOG_LEVEL: 'warn',
    DATA_DIR: opts.dataDir,
    REAKTOR_APPS_DIR: `${opts.dataDir ?? ''}/no-apps`,
    NODE_ID: 'bench-http',
    ADMIN_USERNAME: ADMIN.username,
    ADMIN_PASSWORD: ADMIN.password,
    PORT: '0'
  })
  return await buildApp({ config, databaseUrl: opts.databaseUrl ?? '', apps: [httpApp(opts.publicDir)], logger: true })
}

/** An answer of the service as captured by scenarios/http.ts: headers (less the per-connection ones), body (base64). */
export interface Captured { headers: Record<string, string>, body: string }

async function bare (): Promise<FastifyInstance> {
  const fastify = Fastify()
  for (const schema of SHARED_SCHEMAS) fastify.addSchema(schema)
  await fastify.register(fastifyStatic, { root: opts.publicDir, prefix: '/static/' })
  // What the service answered, handed over by scenarios/http.ts once the service is up.
  const answers = new Map<string, { headers: Record<string, string>, body: Buffer }>()
  let list: unknown = {}
  fastify.get('/same/:name', async (request, reply) => {
    const answer = answers.get((request.params as { name: string }).name)
    if (answer === undefined) return await reply.code(404).send()
    return await reply.headers(answer.headers).send(answer.body)
  })
  // The service's response schema, so each request is serialized as the service would without its cache.
  fastify.get('/list', { schema: { response: { 200: PollingList } } }, async () => list)
  fastify.post('/echo', async (request) => request.body)
  serveJson = (msg) => {
    list = msg.list
    for (const [name, captured] of Object.entries(msg.same as Record<string, Captured>)) {
      answers.set(name, { headers: captured.headers, body: Buffer.from(captured.body, 'base64') })
    }
  }
  await fastify.ready()
  return fastify
}

let serveJson: ((msg: Record<string, unknown>) => void) | undefined

try {
  const app = kind === 'service' ? await service() : await bare()
  const address = await app.listen({ port: 0, host: '127.0.0.1' })
  serveParent({
    setJson: (msg) => { serveJson?.(msg); return {} }
  }, async () => { await app.close() })
  process.send?.({ type: 'ready', url: address })
} catch (err) {
  fatal(err)
}
