/**
 * `npm run dev`: the service for app authors, restarted on every change to an app or to src/.
 *
 * A supervisor rather than `node --watch`: the embedded PostgreSQL is started here once and kept
 * running across restarts (starting it is most of a cold start), so a reload is only the service's
 * own start; changes to an app's `public/` (served fresh by the running service), dot files and
 * node_modules restart nothing, which `--watch-path` cannot express; each reload says what
 * changed and how long the service took to be back; and the next service process is started ahead
 * of need, its modules imported (most of a start under tsx), waiting for the next change.
 */
import { existsSync, realpathSync, statSync } from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import pino from 'pino'
import pretty from 'pino-pretty'
import { ConfigError, loadConfig, type Config } from './config.js'
import { startEmbeddedPostgres, type EmbeddedPostgres } from './db/embedded.js'
import { spawnService, type ServiceProcess } from './dev/service-process.js'
import { watchChanges, type Change, type ChangeWatcher, type WatchedFolder } from './dev/watch.js'
import { PRETTY_LOG_OPTIONS } from './pretty-log.js'

/** Editors save in bursts of events; one restart per burst. */
const DEBOUNCE_MS = 100
/** A service that has not closed this long after SIGTERM (a stuck run) is killed: a reload must not wait for it. */
const KILL_AFTER_MS = 5000

function fail (message: string): never {
  process.stderr.write(`reaktor-service dev: ${message}\n`)
  process.exit(1)
}

/** LOG_FORMAT: `pretty` (the default here, whatever stdout is) or `json` (the service's own lines, as they are). */
function logFormat (env: NodeJS.ProcessEnv): 'pretty' | 'json' {
  const raw = env.LOG_FORMAT ?? ''
  if (raw === '' || raw === 'pretty') return 'pretty'
  if (raw === 'json') return 'json'
  return fail(`invalid configuration: LOG_FORMAT: ${JSON.stringify(raw)} is not allowed; expected pretty or json`)
}

/**
 * src/ and the apps folder, and every app folder linked into it (the watch does not follow
 * links), its changes named by the path the user knows.
 */
async function foldersToWatch (config: Config, log: pino.Logger): Promise<WatchedFolder[]> {
  const folders: WatchedFolder[] = [{ dir: import.meta.dirname, service: true }]
  const apps = config.reaktorAppsDir
  if (!existsSync(apps)) {
    log.info({ dir: apps }, 'REAKTOR_APPS_DIR does not exist: not watched (create it, and change a file in src/ to reload)')
    return folders
  }
  folders.push({ dir: apps, publicAt: 1 })
  for (const entry of await fs.readdir(apps, { withFileTypes: true })) {
    const link = path.join(apps, entry.name)
    if (!entry.isSymbolicLink() || entry.name.startsWith('.')) continue
    const target = (() => { try { return statSync(link).isDirectory() ? realpathSync(link) : undefined } catch { return undefined } })()
    if (target !== undefined) folders.push({ dir: target, shownAs: link, publicAt: 0 })
  }
  return folders
}

async function main (): Promise<void> {
  let config: Config
  try {
    config = loadConfig(process.env)
  } catch (err) {
    if (err instanceof ConfigError) fail(`invalid configuration: ${err.message}`)
    throw err
  }
  // The supervisor's lines and the service's go through one formatter, in the order they come.
  const out = logFormat(process.env) === 'json' ? process.stdout : pretty({ ...PRETTY_LOG_OPTIONS, sync: true })
  const log = pino({ level: config.logLevel, base: undefined }, out)
  const entry = path.join(import.meta.dirname, `server${path.extname(import.meta.filename)}`)
  const env = { ...process.env }

  let embedded: EmbeddedPostgres | undefined
  let watcher: ChangeWatcher | undefined
  /** The service serving, or starting; and the next one, its modules imported, waiting to start. */
  let service: ServiceProcess | undefined
  let spare: ServiceProcess | undefined
  /** The spare imported code of src/ that has changed since: it cannot be used. */
  let spareStale = false
  let stopping = false
  let restarting = false
  let pending: Change | undefined

  const spawn = (): ServiceProcess => spawnService({ entry, env, onLine: (line) => { out.write(`${line}\n`) } })

  /** Starts the service (the spare when it is fresh); says when it is ready (timed from `since`), or that it did not start. */
  const launch = async (since: number): Promise<void> => {
    if (stopping) return
    const fresh = spare !== undefined && !spareStale && spare.alive() ? spare : undefined
    if (fresh === undefined) void spare?.stop(0)
    spare = undefined
    spareStale = false
    const current = fresh ?? spawn()
    service = current
    current.start()
    const ready = await current.ready
    // Stopped while starting (for the next reload, or Ctrl-C): whoever stopped it carries on.
    if (stopping || service !== current || current.stopping()) return
    if (ready) log.info(`ready in ${((Date.now() - since) / 1000).toFixed(1)} s`)
    else log.error('the service did not start; waiting for a change to reload')
    const next = spare = spawn()
    void next.waiting.then((waits) => { if (waits) log.debug({ pid: next.pid }, 'the next service process has imported its modules, ready for a reload') })
    if (!ready) return
    void current.exited.then(({ code, signal }) => {
      if (!current.stopping()) log.error({ code, signal }, 'the service stopped; waiting for a change to reload')
    })
  }

  /**
   * Restarts the service for a change. A start in progress is stopped too: the change makes it
   * stale. Changes while the service stops make one more restart after it.
   */
  const reload = async (change: Change): Promise<void> => {
    spareStale ||= change.service
    pending ??= change
    if (restarting) return
    restarting = true
    try {
      while (pending !== undefined && !stopping) {
        const { file, seenAt } = pending
        pending = undefined
        log.info(`reloading: ${file} changed`)
        await service?.stop(KILL_AFTER_MS)
        void launch(seenAt)
      }
    } finally {
      restarting = false
    }
  }

  const startUp = (async () => {
    const startedAt = Date.now()
    if (config.databaseUrl === undefined) {
      embedded = await startEmbeddedPostgres({ dataDir: config.dataDir, storeDir: config.embeddedPostgresDir, log: log.child({ component: 'embedded-postgres' }) })
      env.DATABASE_URL = embedded.url
      log.info({ dataDir: config.dataDir }, 'embedded PostgreSQL started; it keeps running across reloads')
    }
    if (stopping) return
    watcher = watchChanges(await foldersToWatch(config, log), DEBOUNCE_MS, (change) => { void reload(change) })
    await launch(startedAt)
  })()

  // Installed before anything starts, so that Ctrl-C during the start also stops the database.
  const shutdown = async (signal: NodeJS.Signals): Promise<void> => {
    if (stopping) {
      // A second Ctrl-C: the user will not wait for a graceful close.
      service?.kill()
      spare?.kill()
      return
    }
    stopping = true
    log.info({ signal }, 'stopping')
    // A service still starting is stopped too: its start then ends, and with it startUp.
    await Promise.all([service?.stop(KILL_AFTER_MS), spare?.stop(0)])
    await startUp.catch(() => {})
    watcher?.close()
    await embedded?.stop()
    log.info('stopped')
    process.exit(0)
  }
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, (s) => { void shutdown(s) })

  try {
    await startUp
  } catch (err) {
    await embedded?.stop().catch(() => {})
    fail(`failed to start: ${(err as Error).message}`)
  }
}

main().catch((err: Error) => fail(`failed: ${err.stack ?? err.message}`))
