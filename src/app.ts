import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify'
import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import sensible from '@fastify/sensible'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { randomUUID } from 'node:crypto'
import { STATUS_CODES } from 'node:http'
import type { Config } from './config.js'
import type { AppDefinition } from './apps/types.js'
import configPlugin from './plugins/config.js'
import errorHandler from './plugins/error-handler.js'
import hostsPlugin from './plugins/hosts.js'
import dbPlugin from './plugins/db.js'
import appsPlugin from './plugins/apps.js'
import auditPlugin from './plugins/audit.js'
import authPlugin from './plugins/auth.js'
import schedulerPlugin, { type SchedulerPluginOptions } from './plugins/scheduler.js'
import appUiPlugin from './plugins/app-ui.js'
import metricsPlugin from './plugins/metrics.js'
import pollingPlugin from './plugins/polling.js'
import openapiPlugin from './plugins/openapi.js'
import healthRoutes from './routes/health.js'
import loginRoutes from './routes/login.js'
import authRoutes from './routes/auth.js'
import pollingRoutes from './routes/polling.js'
import pollingRunsRoutes from './routes/polling-runs.js'
import pollingBulkRoutes from './routes/polling-bulk.js'
import aktorRoutes from './routes/aktor.js'
import auditRoutes from './routes/audit.js'
import appsRoutes from './routes/apps.js'
import openapiRoutes from './routes/openapi.js'
import tokenRoutes from './routes/tokens.js'
import docsRoutes from './routes/docs.js'
import usersRoutes from './routes/users.js'
import { MAX_ID_PARAM_LENGTH } from './schemas/polling.js'
import { loggerOptions } from './logging/options.js'
import { requestLoggerFactory } from './logging/request-logger.js'

export type { Config } from './config.js'
export { loadConfig } from './config.js'
export type { AppDefinition, LoadedApp } from './apps/types.js'
// Part of the package's public API (its main export is this module): a host building its own pino logger uses them.
export { loggerOptions, REDACT } from './logging/options.js'

/** `true`: the service's own pino setup; a pino instance; or Fastify logger options (false for none). */
export type LoggerOption = boolean | FastifyBaseLogger | FastifyServerOptions['logger']

export interface AppOptions {
  config: Config
  /** The resolved database: DATABASE_URL, or the embedded server's URL. */
  databaseUrl: string
  /** Apps registered in code, in addition to those loaded from REAKTOR_APPS_DIR. */
  apps?: AppDefinition[]
  /** Load apps from `config.reaktorAppsDir` (default true). */
  loadAppsFromDir?: boolean
  /** Scheduler knobs for tests (clock, minimum interval). */
  scheduler?: SchedulerPluginOptions['overrides']
}

function trustHops (hops: number): (address: string, hop: number) => boolean {
  return (_address, hop) => hop < hops
}

/**
 * The Fastify server options, shared by the server and the tests so that tests run what
 * production runs.
 */
export function serverOptions (config: Config, logger: LoggerOption = true): FastifyServerOptions {
  const logging: Pick<FastifyServerOptions, 'logger' | 'loggerInstance'> = typeof logger === 'object' && 'child' in logger
    ? { loggerInstance: logger }
    : { logger: logger === true ? loggerOptions(config) : logger }
  return {
    ...logging,
    // A hop count trusts that many proxies nearest to us (Fastify's types take it as a function).
    trustProxy: typeof config.trustProxy === 'number' ? trustHops(config.trustProxy) : config.trustProxy,
    genReqId: () => randomUUID(),
    // Without a logger, Fastify skips making request loggers altogether: no factory then.
    ...(logger === false ? {} : { childLoggerFactory: requestLoggerFactory }),
    // Small for everything; the aktor route sets its own, configurable limit (AKTOR_BODY_LIMIT).
    bodyLimit: 64 * 1024,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    // Reaktor ids may be 200 characters, more once percent-encoded (the default is 100).
    routerOptions: { ignoreTrailingSlash: false, maxParamLength: MAX_ID_PARAM_LENGTH },
    // Errors the router raises before any route (bad percent-encoding, over-long parameters) get
    // the same body as every other error.
    frameworkErrors: (error: FastifyError, _request: FastifyRequest, reply: FastifyReply) => {
      const statusCode = typeof (error as { statusCode?: number }).statusCode === 'number' ? (error as { statusCode: number }).statusCode : 400
      void reply.code(statusCode).send({ statusCode, error: STATUS_CODES[statusCode] ?? 'Bad Request', message: error.message })
    }
  }
}

/** The whole service as one plugin, registered in a fixed order: config → db → app plugins → routes. */
export const app: FastifyPluginAsync<AppOptions> = async (fastify, opts) => {
  await fastify.register(configPlugin, { config: opts.config })
  await fastify.register(sensible)
  await fastify.register(errorHandler)
  await fastify.register(hostsPlugin)
  await fastify.register(metricsPlugin)
  await fastify.register(openapiPlugin)
  await fastify.register(dbPlugin, { databaseUrl: opts.databaseUrl })
  await fastify.register(appsPlugin, { apps: opts.apps ?? [], loadFromDir: opts.loadAppsFromDir ?? true })
  await fastify.register(auditPlugin)
  await fastify.register(authPlugin)
  await fastify.register(schedulerPlugin, { overrides: opts.scheduler })
  await fastify.register(pollingPlugin)

  await fastify.register(healthRoutes)
  await fastify.register(loginRoutes)
  await fastify.register(docsRoutes)
  await fastify.register(async (api) => {
    await api.register(authRoutes)
    // Public: it describes the API, holds no data, and the docs page reads it before anyone has a token.
    await api.register(openapiRoutes)
    // Everything below needs X-Service-Token; the API never authenticates by cookie.
    await api.register(async (secured) => {
      secured.addHook('onRequest', secured.authenticate)
      await secured.register(pollingRoutes)
      await secured.register(pollingRunsRoutes)
      await secured.register(pollingBulkRoutes)
      await secured.register(aktorRoutes)
      await secured.register(tokenRoutes)
      await secured.register(usersRoutes)
      await secured.register(auditRoutes)
      await secured.register(appsRoutes)
    })
  }, { prefix: '/api/v1' })
  // Encapsulated on purpose: its policy and headers must never reach the API routes.
  await fastify.register(appUiPlugin, { prefix: '/app-ui' })
}

/** Builds a ready-to-listen service. The server and the tests both call this. */
export async function buildApp (opts: AppOptions & { logger?: LoggerOption }): Promise<FastifyInstance> {
  const fastify = Fastify(serverOptions(opts.config, opts.logger ?? true)).withTypeProvider<TypeBoxTypeProvider>()
  try {
    await fastify.register(fp(app), opts)
    await fastify.ready()
  } catch (err) {
    // Release what the plugins opened so far (pool, connections) before reporting the failure.
    await fastify.close().catch(() => {})
    throw err
  }
  return fastify as unknown as FastifyInstance
}
