/**
 * An HTTP server under test, in its own process. argv[2]: `service` (the whole service, built as
 * src/server.ts builds it) or `bare` (a bare Fastify: @fastify/static on the same public/ folder,
 * routes answering fixed JSON, an echo route). argv[3]: JSON options.
 */
import Fastify, { type FastifyInstance } from 'fastify'
import fastifyStatic from '@fastify/static'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config.js'
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

async function bare (): Promise<FastifyInstance> {
  const fastify = Fastify()
  await fastify.register(fastifyStatic, { root: opts.publicDir, prefix: '/static/' })
  // The JSON the service answered, handed over by run.ts once the service is up.
  let status: unknown = {}
  let list: unknown = {}
  fastify.get('/status', async () => status)
  fastify.get('/list', async () => list)
  fastify.post('/echo', async (request) => request.body)
  serveJson = (s, l) => { status = s; list = l }
  await fastify.ready()
  return fastify
}

let serveJson: ((status: unknown, list: unknown) => void) | undefined

try {
  const app = kind === 'service' ? await service() : await bare()
  const address = await app.listen({ port: 0, host: '127.0.0.1' })
  serveParent({
    setJson: (msg) => { serveJson?.(msg.status, msg.list); return {} }
  }, async () => { await app.close() })
  process.send?.({ type: 'ready', url: address })
} catch (err) {
  fatal(err)
}
