import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import { ListenConnection } from '../db/listen-connection.js'
import type { AppCatalog } from './catalog.js'
import { loadApp, type LoaderLog } from './loader.js'
import type { PackageFolders } from './package-folders.js'
import { activeVersions, APPS_CHANNEL, forgetNodeStates, recordNodeState } from './package-store.js'
import { plainMessage } from './import-errors.js'
import { RegistrationError } from './registry.js'

/** A fetch or load that failed for a reason that may pass (the database, the disk) is tried again this much later. */
const RETRY_MS = 1000

interface Log extends LoaderLog {
  error: (obj: object, msg: string) => void
}

export interface PublishedAppsOptions {
  db: Kysely<Database>
  databaseUrl: string
  nodeId: string
  folders: PackageFolders
  catalog: AppCatalog
  /** Apps loaded from REAKTOR_APPS_DIR or given in code: a published app of the same name is refused here. */
  fixedApps: ReadonlyMap<string, string>
  env: Record<string, string | undefined>
  log: Log
}

/** What this node runs of a published app, and why not the active version when it does not. */
export interface PublishedState {
  version: string | null
  since: Date | null
  /** The active version, when this node could not load it (it keeps the one it had). */
  failed?: { version: string, message: string }
}

/**
 * Keeps this node on the active version of every published app: at start, and whenever a publish,
 * an activation or a deletion commits anywhere (NOTIFY on `reaktor_apps`, payload the app name;
 * after a lost listening connection, every app is looked at again). A version is fetched into
 * DATA_DIR, loaded as a start would load it, and switched to through the catalog; a version that
 * cannot be loaded here leaves the previous one running, and its error is recorded for the API
 * and logged once. What each node runs is written to `app_node_states`.
 */
export class PublishedApps {
  readonly states = new Map<string, PublishedState>()
  private readonly listener: ListenConnection
  private queue: Promise<void> = Promise.resolve()
  private closed = false
  private readonly notified: Array<(name: string | undefined) => void> = []

  constructor (private readonly opts: PublishedAppsOptions) {
    this.listener = new ListenConnection({
      url: opts.databaseUrl,
      applicationName: `reaktor-apps ${opts.nodeId}`.slice(0, 63),
      channel: APPS_CHANNEL,
      name: 'published apps',
      whileLost: 'app versions switch on this node once it is back',
      log: opts.log,
      onNotification: (name) => { this.tell(name); this.enqueue([name]) },
      onReset: () => { this.tell(undefined); this.enqueue(undefined) }
    })
  }

  /** Listens first (nothing published meanwhile is missed), then loads every active version. */
  async start (): Promise<void> {
    await this.listener.start()
    this.enqueue(undefined)
    await this.settled()
  }

  /** Stops following the cluster; this node's states go (a node that comes back says what it runs anew). */
  async stop (): Promise<void> {
    this.closed = true
    await this.listener.stop()
    await this.queue
    await forgetNodeStates(this.opts.db, this.opts.nodeId, []).catch((err: unknown) => {
      this.opts.log.warn({ err }, 'published apps: this node\'s states could not be removed at shutdown')
    })
  }

  /** Resolves once every switch asked for so far is done. */
  async settled (): Promise<void> {
    let seen: Promise<void> | undefined
    while (seen !== this.queue) {
      seen = this.queue
      await seen
    }
  }

  /**
   * Called when a change of an app (a publish, an activation, a deletion of it or of a version)
   * committed anywhere, or (undefined) when changes may have been missed: what is kept of the
   * app's versions here (their UI sites) is looked at again.
   */
  onNotified (listener: (name: string | undefined) => void): void {
    this.notified.push(listener)
  }

  private tell (name: string | undefined): void {
    for (const listener of this.notified) listener(name)
  }

  /** Apps this node runs an older version of than the active one (it could not load that). */
  stale (): Set<string> {
    return new Set([...this.states].filter(([, s]) => s.failed !== undefined && s.version !== null).map(([name]) => name))
  }

  /** Looks at these apps again (all when undefined), after the switches already asked for. */
  enqueue (names: string[] | undefined): void {
    const retry: string[] = []
    this.queue = this.queue.then(async () => {
      if (this.closed) return
      const active = await activeVersions(this.opts.db)
      const all = names ?? [...new Set([...active.keys(), ...this.states.keys()])].sort()
      for (const name of all) if (!await this.sync(name, active.get(name))) retry.push(name)
      if (names === undefined) await forgetNodeStates(this.opts.db, this.opts.nodeId, [...this.states.keys()])
    }).catch((err: unknown) => {
      this.opts.log.error({ err }, 'published apps: could not read the active versions; trying again in a second')
      retry.splice(0, retry.length, ...(names ?? ['*']))
    }).then(() => {
      // A database or disk that failed for a moment is tried again; a version that does not load is not.
      if (retry.length === 0 || this.closed) return
      setTimeout(() => this.enqueue(retry.includes('*') ? undefined : retry), RETRY_MS).unref()
    })
  }

  /** Brings one app to `version` (undefined: deleted). False: it failed for a reason that may pass (tried again). */
  private async sync (name: string, version: string | undefined): Promise<boolean> {
    const { catalog, log } = this.opts
    const state = this.states.get(name)
    if (version === undefined) {
      if (state === undefined) return true
      this.states.delete(name)
      if (catalog.app(name) !== undefined && !this.opts.fixedApps.has(name)) await catalog.replace(name, undefined)
      log.info({ app: name }, `published app ${name} deleted: no longer run here`)
      await this.opts.folders.remove(name).catch((err: unknown) => { log.warn({ err, app: name }, `published app ${name}: its unpacked folders could not be removed`) })
      return true
    }
    if (state?.version === version && state.failed === undefined) return true
    if (state?.failed?.version === version) return true
    let app
    try {
      const fixed = this.opts.fixedApps.get(name)
      if (fixed !== undefined) throw new RegistrationError(`app ${name} is loaded from ${fixed} and also published (version ${version} is active); remove one of them: the copy of ${fixed} runs here`)
      const dir = await this.opts.folders.ensure(name, version)
      if (dir === undefined) return true
      app = await loadApp(dir, this.opts.env, log)
      if (app.name !== name || app.version !== version) throw new RegistrationError(`the package stored as ${name}@${version} holds ${app.name}@${app.version}`)
      // Set first: what the scheduler advertises during the switch counts this app as current.
      this.states.set(name, { version, since: new Date() })
      await catalog.replace(name, app)
    } catch (err) {
      if (!(err instanceof RegistrationError)) {
        if (state === undefined) this.states.delete(name)
        else this.states.set(name, state)
        log.warn({ err, app: `${name}@${version}` }, `published app ${name}@${version}: could not be fetched or loaded for now; trying again in a second`)
        return false
      }
      const next: PublishedState = { version: state?.version ?? null, since: state?.since ?? null, failed: { version, message: plainMessage(err) } }
      this.states.set(name, next)
      log.error({ app: `${name}@${version}`, running: next.version }, `published app ${name}@${version} cannot run on this node; ${next.version === null ? 'no version of it runs here' : `it keeps ${name}@${next.version}`}: ${next.failed!.message}`)
      await this.record(name, next).catch((e: unknown) => { log.warn({ err: e }, 'published apps: could not record this node\'s state') })
      // Ownership prefers the nodes that run the active version.
      if (next.version !== null) await catalog.announce(name)
      return true
    }
    log.info({ app: `${name}@${version}`, previous: state?.version ?? null }, `published app ${name}@${version} runs here`)
    await this.record(name, this.states.get(name)!).catch((e: unknown) => { log.warn({ err: e }, 'published apps: could not record this node\'s state') })
    return true
  }

  private async record (name: string, state: PublishedState): Promise<void> {
    await recordNodeState(this.opts.db, this.opts.nodeId, name, { version: state.version, since: state.since, error: state.failed?.message ?? null })
  }
}
