/**
 * `npm run dev`: the service for app authors. A change in an app folder reloads that app in place
 * in the running service (src/dev/app-reload.ts): the process, its reaktors' states and what they
 * started survive a save. A change to src/ (or one a switch cannot do) restarts the service.
 *
 * A supervisor rather than `node --watch`: the embedded PostgreSQL is started here once and kept
 * running across restarts (starting it is most of a cold start), so a restart is only the service's
 * own start; changes to an app's `public/` (served fresh by the running service), dot files and
 * node_modules reload nothing, which `--watch-path` cannot express; each reload says what
 * changed and how long it took; and the next service processes are started ahead of need, their
 * modules imported (most of a start under tsx), waiting for the next restart.
 */
import { existsSync, realpathSync, statSync } from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import pino from 'pino'
import pretty from 'pino-pretty'
import { ConfigError, loadConfig, type Config } from './config.js'
import { startEmbeddedPostgres, type EmbeddedPostgres } from './db/embedded.js'
import { spawnService, type ServiceProcess } from './dev/service-process.js'
import { mergeChanges, watchChanges, watchFailure, type Change, type ChangeWatcher, type WatchedFolder } from './dev/watch.js'
import { PRETTY_LOG_OPTIONS } from './logging/pretty.js'
import { isAlive } from './lib/processes.js'

/** Editors save in bursts of events; one restart per burst. */
const DEBOUNCE_MS = 100
/**
 * Changes that came while the service started (saves in quick succession) restart it once they
 * have paused this long, or this long at most after that start: a restart for each would use up
 * the processes started ahead, and the last change would find none ready.
 */
const BURST_QUIET_MS = 300
const BURST_WAIT_MAX_MS = 3000
/** A service that has not closed this long after SIGTERM (a stuck run) is killed: a reload must not wait for it. */
const KILL_AFTER_MS = 5000
/**
 * A reload in place not answered this long after it was asked for is given up for a restart: an
 * import may take 5 s (IMPORT_LIMIT_MS) and locating its syntax error 3 s more.
 */
const RELOAD_LIMIT_MS = 15_000
/**
 * Service processes kept started ahead. Two, so that the second of two changes close together (a
 * compiler writing its output after the source is saved) finds one ready too: the one started when
 * the first was used is still importing then.
 */
const AHEAD = 2
/** How often the supervisor checks that the process that started it is still there. */
const PARENT_CHECK_MS = 1000

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
 * Whether the process that started this one has ended. `npm run dev` runs the supervisor through
 * a shell, which does not pass signals on: npm stopped alone (an IDE's stop button, `timeout`, a
 * process manager) ends npm and the shell, and would leave the supervisor, the service and the
 * database running. process.ppid is read afresh each time (an orphan's parent is another process);
 * where it does not change, the first parent's end is what can be seen.
 */
function parentEnded (first: number): boolean {
  return process.ppid !== first || !isAlive(first)
}

/**
 * The folder a missing `dir` will appear in (its nearest folder that exists), watched for the
 * entry on the way to it.
 */
function appearing (dir: string): WatchedFolder {
  let entry = dir
  while (!existsSync(path.dirname(entry)) && path.dirname(entry) !== entry) entry = path.dirname(entry)
  return { dir: path.dirname(entry), only: path.basename(entry) }
}

/**
 * src/, the apps folder (from its parent too: removed, made again, or made after the start), and
 * every app folder linked into it (the watch does not follow links), its changes named by the path
 * the user knows. Computed again on every change, so that a folder linked or unlinked since counts.
 */
async function foldersToWatch (apps: string): Promise<WatchedFolder[]> {
  const folders: WatchedFolder[] = [{ dir: import.meta.dirname, service: true }, appearing(apps)]
  if (!existsSync(apps)) return folders
  folders.push({ dir: apps, publicAt: 1 })
  const entries = await fs.readdir(apps, { withFileTypes: true }).catch(() => [])
  for (const entry of entries) {
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
  // An output gone (the terminal or IDE closed) must not end the supervisor before it has stopped
  // the service and the database.
  process.stdout.on('error', () => {})
  process.stderr.on('error', () => {})
  // The supervisor's lines and the service's go through one formatter, in the order they come.
  const out = logFormat(process.env) === 'json' ? process.stdout : pretty({ ...PRETTY_LOG_OPTIONS, sync: true })
  const log = pino({ level: config.logLevel, base: undefined }, out)
  const entry = path.join(import.meta.dirname, `server${path.extname(import.meta.filename)}`)
  const env = { ...process.env }
  const appsDir = config.reaktorAppsDir

  let embedded: EmbeddedPostgres | undefined
  let watcher: ChangeWatcher | undefined
  /** The service serving, or starting; and the next ones, started ahead: their modules imported, they wait to start. */
  let service: ServiceProcess | undefined
  const spares: ServiceProcess[] = []
  let stopping = false
  let reloading = false
  /** The changes not reloaded for yet (as one), and when the last change came. */
  let pending: Change | undefined
  let lastChangeAt = 0

  const spawn = (): ServiceProcess => {
    const child = spawnService({ entry, env, onLine: (line) => { out.write(`${line}\n`) } })
    void child.waiting.then((waits) => {
      if (waits && !child.stopping()) log.debug(`service process ${child.pid} has imported its modules; it waits to start`)
    })
    return child
  }

  /**
   * Starts processes ahead until AHEAD of them wait, one at a time (each import takes the CPU the
   * service's start wants). One that cannot import (src/ broken) is not replaced: it shows its
   * error when it is used.
   */
  const startAhead = (): void => {
    if (stopping || spares.length >= AHEAD || spares.some((spare) => !spare.imported())) return
    const next = spawn()
    spares.push(next)
    void next.waiting.then((waits) => {
      if (!waits) return
      startAhead()
      // One that ends while it waits (killed from outside) would fail the start it is used for.
      void next.exited.then(() => {
        if (next.stopping() || !spares.includes(next)) return
        spares.splice(spares.indexOf(next), 1)
        startAhead()
      })
    })
  }

  /**
   * Starts the service with a process started ahead, and at once starts the next one ahead (it
   * imports while this one starts); says when the service is ready (timed from `since`), or that it
   * did not start.
   */
  const launch = async (since: number): Promise<void> => {
    if (stopping) return
    const current = spares.shift() ?? spawn()
    startAhead()
    service = current
    log.debug(`service process ${current.pid} takes over`)
    current.start()
    const ready = await current.ready
    // Stopped while starting (Ctrl-C): whoever stopped it carries on.
    if (stopping || service !== current || current.stopping()) return
    if (!ready) {
      log.error('the service did not start; waiting for a change to reload')
      return
    }
    log.info(`ready in ${((Date.now() - since) / 1000).toFixed(1)} s`)
    void current.exited.then(({ code, signal }) => {
      if (!current.stopping()) log.error({ code, signal }, 'the service stopped; waiting for a change to reload')
    })
  }

  /** A change to src/: the processes started ahead have imported the code as it was. */
  const renewSpares = (): void => {
    if (stopping) return
    for (const spare of spares.splice(0)) void spare.stop(0)
    startAhead()
  }

  /** Settles once changes have paused for BURST_QUIET_MS, or BURST_WAIT_MAX_MS from now. */
  const pause = async (): Promise<void> => {
    const deadline = Date.now() + BURST_WAIT_MAX_MS
    for (;;) {
      const wait = Math.min(lastChangeAt + BURST_QUIET_MS, deadline) - Date.now()
      if (wait <= 0 || stopping) return
      await new Promise((resolve) => setTimeout(resolve, wait))
    }
  }

  /** Settles once the service's start in progress has (or has taken too long: a start that hangs). */
  const started = async (current: ServiceProcess | undefined): Promise<void> => {
    if (current === undefined) return
    let timer: NodeJS.Timeout | undefined
    await Promise.race([current.ready, new Promise((resolve) => { timer = setTimeout(resolve, KILL_AFTER_MS) })])
    clearTimeout(timer)
  }

  /** Said when it changes; at the start only when it is missing. */
  let appsThere = true
  /** The folders to watch, computed again for each change: the last computation is what reloads wait for. */
  let rewatched = Promise.resolve()
  const rewatch = (): void => {
    rewatched = rewatched.then(async () => {
      const folders = await foldersToWatch(appsDir)
      if (stopping) return
      // Watched itself only when it is there: the same look as the folders', not a second one.
      const there = folders.some((folder) => folder.dir === appsDir)
      if (there !== appsThere) {
        if (there) log.info({ dir: appsDir }, 'REAKTOR_APPS_DIR is there: watched')
        else log.info({ dir: appsDir }, 'REAKTOR_APPS_DIR does not exist: watched for it to appear')
      }
      appsThere = there
      if (watcher === undefined) watcher = watchChanges(folders, { debounceMs: DEBOUNCE_MS, onChange, onError })
      else watcher.update(folders)
    }).catch((err: Error) => { log.error({ err }, 'the folders to watch could not be listed') })
  }

  /** Once for each kind of error: a limit reached would otherwise be said for every folder after it. */
  const watchErrors = new Set<string>()
  const onError = (err: NodeJS.ErrnoException, dir: string): void => {
    const code = err.code ?? err.message
    if (watchErrors.has(code)) return
    watchErrors.add(code)
    log.error(watchFailure(err, dir))
  }

  /**
   * Reloads the app folders of `change` in the serving service, each with one line saying how it
   * went. Resolves with why the service must restart instead ('' for no reason worth saying: it
   * does not serve), or undefined when every folder has been dealt with.
   */
  const reloadInPlace = async (change: Change): Promise<string | undefined> => {
    const current = service
    if (change.inPlace === undefined || current === undefined || !current.serving()) return ''
    for (const { folder, file } of change.inPlace) {
      const answer = await current.reloadApp(folder, RELOAD_LIMIT_MS)
      if (stopping) return undefined
      const took = `${((Date.now() - change.seenAt) / 1000).toFixed(1)} s`
      if (answer === undefined) return ` (the service did not answer its reload in place within ${RELOAD_LIMIT_MS / 1000} s)`
      if (answer.outcome === 'restart') return ` (${answer.reason}: a restart loads it)`
      if (answer.outcome === 'reloaded') log.info(`reloaded in place in ${took}: ${file} changed`)
      else log.warn(`not reloaded: ${file} changed, but ${answer.app} did not load (the error is above); it keeps running the version it ran (${took})`)
    }
    return undefined
  }

  /**
   * Reloads for the changes not reloaded for yet: the app folders they changed in place, or else
   * a restart of the service. A start in progress is let finish: stopping it would wait for it
   * anyway (a service closes once started), and a process started ahead then takes over at once.
   * Changes meanwhile make one more reload, for all of them, once they pause.
   */
  const reload = async (change: Change): Promise<void> => {
    if (change.service) renewSpares()
    pending = mergeChanges(pending, change)
    lastChangeAt = Date.now()
    if (reloading) return
    reloading = true
    try {
      await started(service)
      for (let burst = false; pending !== undefined && !stopping; burst = true) {
        if (burst) await pause()
        await rewatched
        if (stopping) return
        const next = pending
        pending = undefined
        const restartBecause = await reloadInPlace(next)
        if (restartBecause === undefined || stopping) continue
        log.info(`reloading: ${next.file} changed${restartBecause}`)
        await service?.stop(KILL_AFTER_MS)
        await launch(next.seenAt)
      }
    } finally {
      reloading = false
    }
  }
  const onChange = (change: Change): void => {
    rewatch()
    void reload(change)
  }

  const startUp = (async () => {
    const startedAt = Date.now()
    // Imports while the database starts; the database's address is given when it is told to start.
    startAhead()
    if (config.databaseUrl === undefined) {
      embedded = await startEmbeddedPostgres({ dataDir: config.dataDir, storeDir: config.embeddedPostgresDir, log: log.child({ component: 'embedded-postgres' }) })
      env.DATABASE_URL = embedded.url
      log.info({ dataDir: config.dataDir }, 'embedded PostgreSQL started; it keeps running across reloads')
    }
    if (stopping) return
    // The service is set before the first change can come: a reload then waits for its start.
    const first = launch(startedAt)
    rewatch()
    await first
  })()

  const killAll = (): void => {
    service?.kill()
    for (const spare of spares) spare.kill()
  }
  // Installed before anything starts, so that Ctrl-C during the start also stops the database.
  const shutdown = async (signal?: NodeJS.Signals): Promise<void> => {
    if (stopping) {
      // A second Ctrl-C: the user will not wait for a graceful close.
      killAll()
      return
    }
    stopping = true
    log.info({ signal }, 'stopping')
    // A service still starting is stopped too: its start then ends, and with it startUp.
    await Promise.all([service?.stop(KILL_AFTER_MS), ...spares.map(async (spare) => await spare.stop(0))])
    await startUp.catch(() => {})
    watcher?.close()
    await embedded?.stop()
    // What an app started and that outlived the service's SIGTERM: this is the last chance.
    killAll()
    log.info('stopped')
    process.exit(0)
  }
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, (s) => { void shutdown(s) })
  const parent = process.ppid
  setInterval(() => {
    if (stopping || !parentEnded(parent)) return
    log.info('the process that started the dev loop has ended (npm run dev stopped by a signal its shell does not pass on)')
    void shutdown()
  }, PARENT_CHECK_MS).unref()

  try {
    await startUp
  } catch (err) {
    // Ctrl-C during the database's start ends that start: stopping, not a failure.
    if (stopping) return
    for (const spare of spares) spare.kill()
    await embedded?.stop().catch(() => {})
    fail(`failed to start: ${(err as Error).message}`)
  }
}

main().catch((err: Error) => fail(`failed: ${err.stack ?? err.message}`))
