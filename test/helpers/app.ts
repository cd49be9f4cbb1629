import path from 'node:path'
import fp from 'fastify-plugin'
import Fastify, { type FastifyInstance, type RouteOptions } from 'fastify'
import pino from 'pino'
import { app as servicePlugin, buildApp, loggerOptions, serverOptions, type AppOptions } from '../../src/app.js'
import type { AppDefinition } from '../../src/apps/types.js'
import { lowerPasswordCostForTests } from '../../src/auth/password.js'
import { loadConfig, type Config } from '../../src/config.js'
import { tempDir } from './temp-dir.js'
import type { TestContext } from './test-context.js'
import { createTestDatabase } from './database.js'
import { logOutput } from './log.js'
import { FAST_SCHEDULER } from './scheduler.js'

// Every service these tests build in this process hashes passwords cheaply: logins are the bulk of
// the suite's CPU otherwise. test/unit/password-cost.test.ts checks the service's own cost.
lowerPasswordCostForTests()

/** A validated config for tests: quiet, its own DATA_DIR, no apps unless given (not even the console). */
export async function testConfig (t: TestContext, env: Record<string, string> = {}): Promise<Config> {
  const dataDir = await tempDir(t, 'reaktor-data-')
  // No console unless a test asks for it (CONSOLE or a REAKTOR_APPS_DIR holding it): the apps a test sees are the ones it gives.
  return loadConfig({ LOG_LEVEL: 'silent', DATA_DIR: dataDir, REAKTOR_APPS_DIR: path.join(dataDir, 'no-apps'), NODE_ID: 'test-node', CONSOLE: 'false', ...env })
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

export interface LoggedApp {
  app: FastifyInstance
  databaseUrl: string
  /** Every line of the service's log at info and above, as written. */
  lines: string[]
  /** The audit objects of those lines, in order. */
  audits: () => Array<Record<string, any>>
}

/**
 * Builds the app as production does, with its real logger (at info, into `lines`), on a fresh
 * database and with the scheduler paced for tests; closed at teardown.
 */
export async function buildLogged (t: TestContext, env: Record<string, string>, apps: AppDefinition[]): Promise<LoggedApp> {
  const config = await testConfig(t, env)
  const databaseUrl = await createTestDatabase(t)
  const { stream, lines } = logOutput()
  const app = await buildApp({ config, databaseUrl, logger: pino({ ...loggerOptions(config), level: 'info' }, stream), apps, scheduler: FAST_SCHEDULER })
  t.teardown(async () => await app.close())
  const audits = (): Array<Record<string, any>> => lines.map((l) => JSON.parse(l)).filter((l) => l.audit !== undefined).map((l) => l.audit)
  return { app, databaseUrl, lines, audits }
}

/** The value of an unlabelled metric as `GET /metrics` shows it (NaN when absent). */
export async function metric (app: FastifyInstance, name: string): Promise<number> {
  const { body } = await app.inject({ method: 'GET', url: '/metrics' })
  const line = body.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
  return line === undefined ? NaN : Number(line.slice(line.lastIndexOf(' ') + 1))
}
