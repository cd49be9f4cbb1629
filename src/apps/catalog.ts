import { buildRegistry } from './registry.js'
import type { AppRegistry, LoadedApp } from './types.js'

interface Log {
  warn: (obj: object, msg: string) => void
  error: (obj: object, msg: string) => void
}

/** What a switch of one app changed: polling reaktor ids added, given a new registration, dropped. */
export interface AppChange {
  app: string
  added: string[]
  changed: string[]
  removed: string[]
}

type Listener = (change: AppChange) => Promise<void>

/**
 * The apps this node runs, as one registry whose maps stay the same objects while apps switch
 * versions: the scheduler, the status reads and the aktor route hold them and see every switch.
 * `replace` puts an app's new version (or nothing) in place of its current one, after checking the
 * whole set as a start would (ids unique across apps, every registration valid); a set that would
 * not start is refused and nothing changes. Switches are applied one at a time, listeners included.
 */
export class AppCatalog {
  readonly registry: AppRegistry
  private current: AppRegistry
  private readonly listeners: Listener[] = []
  private queue: Promise<unknown> = Promise.resolve()

  constructor (apps: LoadedApp[], private readonly log: Log) {
    this.current = buildRegistry(apps, log)
    const current = (): AppRegistry => this.current
    this.registry = {
      // Whatever runs now: derived, not kept in step.
      get apps () { return current().apps },
      findApp: (name, version) => this.current.findApp(name, version),
      pollingReaktors: new Map(this.current.pollingReaktors),
      reaktors: new Map(this.current.reaktors)
    }
  }

  /** Called after each switch, in order, before the next switch starts. */
  onChange (listener: Listener): void {
    this.listeners.push(listener)
  }

  /** Tells the listeners that what is advertised of `name` may have changed, its registrations not. */
  async announce (name: string): Promise<void> {
    const run = this.queue.then(async () => { await this.tell({ app: name, added: [], changed: [], removed: [] }) })
    this.queue = run.catch(() => {})
    await run
  }

  /** The app of that name this node runs. */
  app (name: string): LoadedApp | undefined {
    return this.current.apps.find((a) => a.name === name)
  }

  /**
   * Throws the RegistrationError a start would when `next` took the place of the app of its name
   * (or joined the set): nothing is changed.
   */
  check (next: LoadedApp): void {
    this.candidate(next.name, next)
  }

  /** Switches the app `name` to `next` (undefined: the app goes away). Resolves once listeners are done. */
  async replace (name: string, next: LoadedApp | undefined): Promise<AppChange> {
    const run = this.queue.then(async () => await this.apply(name, next))
    this.queue = run.catch(() => {})
    return await run
  }

  /**
   * Every listener, each whatever the others did: the switch stands once the maps changed, and a
   * listener that failed (its database write) logs it and catches up on its own.
   */
  private async tell (change: AppChange): Promise<void> {
    for (const listener of this.listeners) {
      try {
        await listener(change)
      } catch (err) {
        this.log.error({ err, app: change.app }, `app ${change.app}: a part of the service did not take in its switch: ${String((err as Error)?.message ?? err)}`)
      }
    }
  }

  private candidate (name: string, next: LoadedApp | undefined): AppRegistry {
    const others = this.current.apps.filter((a) => a.name !== name)
    // Warnings of the other apps were logged when they were loaded: only the new one's are news.
    const key = next === undefined ? undefined : `${next.name}@${next.version}`
    const log: Pick<Log, 'warn'> = { warn: (obj, msg) => { if ((obj as { app?: string }).app === key) this.log.warn(obj, msg) } }
    return buildRegistry(next === undefined ? others : [...others, next], log)
  }

  private async apply (name: string, next: LoadedApp | undefined): Promise<AppChange> {
    const built = this.candidate(name, next)
    const before = this.app(name)
    const idsOf = (app: LoadedApp | undefined): Set<string> => new Set((app?.pollingReaktors ?? []).map((r) => r.reaktorDefinitionId))
    const old = idsOf(before)
    const now = idsOf(next)
    const change: AppChange = {
      app: name,
      added: [...now].filter((id) => !old.has(id)).sort(),
      changed: [...now].filter((id) => old.has(id)).sort(),
      removed: [...old].filter((id) => !now.has(id)).sort()
    }
    const { registry } = this
    for (const id of change.removed) registry.pollingReaktors.delete(id)
    for (const id of [...change.added, ...change.changed]) registry.pollingReaktors.set(id, built.pollingReaktors.get(id)!)
    for (const [id, r] of registry.reaktors) if (r.app === before) registry.reaktors.delete(id)
    for (const [id, r] of built.reaktors) if (r.app === next) registry.reaktors.set(id, r)
    this.current = built
    await this.tell(change)
    return change
  }
}
