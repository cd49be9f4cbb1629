import path from 'node:path'
import fp from 'fastify-plugin'
import Fastify, { type FastifyInstance, type RouteOptions } from 'fastify'
import { app as servicePlugin, buildApp, serverOptions, type AppOptions } from '../../src/app.js'
import { loadConfig, type Config } from '../../src/config.js'
import { tempDir, type TestContext } from './context.js'
import { createTestDatabase } from './database.js'

/** A validated config for tests: quiet, its own DATA_DIR, no apps unless given. */
export async function testConfig (t: TestContext, env: Record<string, string> = {}): Promise<Config> {
  const dataDir = await tempDir(t, 'reaktor-data-')
  return loadConfig({ LOG_LEVEL: 'silent', DATA_DIR: dataDir, REAKTOR_APPS_DIR: path.join(dataDir, 'no-apps'), NODE_ID: 'test-node', ...env })
}

export interface BuildOptions extends Partial<AppOptions> {
  /** Environment of the test config (when no `config` is given). */
  env?: Record<string, string>
  /**
   * Adds one route behind `fastify.authenticate`, `GET /api/v1/test/whoami` (the session's
   * username and expiry), for the auth tests: no other authenticated route may exist yet; and
   * `GET /api/v1/test/admin` behind `requireAdmin`.
   */
  whoami?: boolean
  /** Sees every route as it is registered (an onRoute hook added before the service's plugins). */
  onRoute?: (route: RouteOptions) => void
}

/** Builds the app as production does, on a fresh database unless given one; closed at teardown. */
export async function build (t: TestContext, opts: BuildOptions = {}): Promise<FastifyInstance> {
  const config = opts.config ?? await testConfig(t, opts.env)
  const databaseUrl = opts.databaseUrl ?? await createTestDatabase(t)
  if (opts.whoami !== true && opts.onRoute === undefined) {
    const app = await buildApp({ ...opts, config, databaseUrl, logger: false })
    t.teardown(async () => await app.close())
    return app
  }
  // buildApp's server and plugin, with the hook or the probe route added before the server is ready.
  const fastify = Fastify(serverOptions(config, false))
  t.teardown(async () => await fastify.close())
  if (opts.onRoute !== undefined) fastify.addHook('onRoute', opts.onRoute)
  await fastify.register(fp(servicePlugin), { ...opts, config, databaseUrl })
  if (opts.whoami === true) {
    await fastify.register(async (secured) => {
      secured.addHook('onRequest', secured.authenticate)
      secured.get('/api/v1/test/whoami', async (request) => ({ username: request.auth?.username, expiresAt: request.auth?.expiresAt?.toISOString() ?? null, role: request.auth?.role, kind: request.auth?.kind }))
      // An admin-only route, for what a role allows: `GET /api/v1/test/admin`.
      secured.get('/api/v1/test/admin', { preHandler: secured.requireAdmin }, async (request) => ({ username: request.auth?.username }))
    })
  }
  await fastify.ready()
  return fastify
}

/** The value of an unlabelled metric as `GET /metrics` shows it (NaN when absent). */
export async function metric (app: FastifyInstance, name: string): Promise<number> {
  const { body } = await app.inject({ method: 'GET', url: '/metrics' })
  const line = body.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
  return line === undefined ? NaN : Number(line.slice(line.lastIndexOf(' ') + 1))
}
