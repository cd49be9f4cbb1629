import closeWithGrace from 'close-with-grace'
import type { FastifyInstance } from 'fastify'
import pino from 'pino'
import { buildApp } from './app.js'
import { ConfigError, loadConfig, type Config } from './config.js'
import { startEmbeddedPostgres, type EmbeddedPostgres } from './db/embedded.js'
import { reloadAppFolder } from './dev/app-reload.js'
import { answerReloads, supervisorSaysStart, tellSupervisorListening } from './dev/supervised.js'
import { loggerOptions } from './logging/options.js'
import { PRETTY_LOG_OPTIONS } from './logging/pretty.js'

function createLogger (config: Config): pino.Logger {
  return pino({
    ...loggerOptions(config),
    // Pretty output only for a person at a terminal; the format never changes behaviour.
    transport: process.stdout.isTTY ? { target: 'pino-pretty', options: PRETTY_LOG_OPTIONS } : undefined
  })
}

async function main (): Promise<void> {
  await supervisorSaysStart()
  let config: Config
  try {
    config = loadConfig(process.env)
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`reaktor-service: invalid configuration: ${err.message}\n`)
      process.exit(1)
    }
    throw err
  }
  const log = createLogger(config)

  let embedded: EmbeddedPostgres | undefined
  let app: FastifyInstance | undefined
  const shutdown = async (): Promise<void> => {
    await app?.close()
    await embedded?.stop()
  }

  const startUp = (async () => {
    let databaseUrl = config.databaseUrl
    if (databaseUrl === undefined) {
      embedded = await startEmbeddedPostgres({ dataDir: config.dataDir, storeDir: config.embeddedPostgresDir, log: log.child({ component: 'embedded-postgres' }) })
      databaseUrl = embedded.url
      log.info({ dataDir: config.dataDir }, 'embedded PostgreSQL started')
    }
    const built = await buildApp({ config, databaseUrl, logger: log })
    app = built
    tellSupervisorListening(await built.listen({ port: config.port, host: config.host }))
    answerReloads(async (folder) => await reloadAppFolder(folder, { catalog: built.appCatalog, env: config.appSettingsEnv, log: built.log }))
  })()

  // Installed before anything starts, so a signal during start-up also stops what has started.
  const grace = closeWithGrace({ delay: config.shutdownGraceMs + 5000, logger: log }, async ({ signal, err }) => {
    if (err !== undefined) log.error({ err }, 'shutting down after an error')
    else log.info({ signal }, 'shutting down')
    await startUp.catch(() => {})
    await shutdown()
    log.info('stopped')
  })

  try {
    await startUp
  } catch (err) {
    // Nothing may outlive a failed start: close the app (pool, locks) and the embedded database.
    grace.uninstall()
    await shutdown().catch(() => {})
    throw err
  }
}

main().catch((err: Error) => {
  // A start-up failure is one clear line, not a stack trace; details at debug level only.
  process.stderr.write(`reaktor-service: failed to start: ${err.message}\n`)
  if (process.env.LOG_LEVEL === 'debug' || process.env.LOG_LEVEL === 'trace') process.stderr.write(`${err.stack ?? ''}\n`)
  process.exit(1)
})
