import path from 'node:path'
import { buildCsp, EXTERNAL_RESOURCES_FILE, loadAllowedOrigins } from './csp.js'
import type { FileCache } from './file-cache.js'
import { FolderWatcher } from './folder-watcher.js'
import type { PublicFolder, Resolution } from './safe-path.js'

/**
 * The cache key of one content of a file: its real path and the size, mtime and inode it had
 * when resolved. While changes are watched, an entry is invalidated by path as soon as its file
 * changes; when they cannot be, a file resolved afresh with another size, mtime or inode (a save
 * by rename included) simply misses the entries of its earlier contents.
 */
export function cacheKey (file: Extract<Resolution, { kind: 'file' }>): string {
  return `${file.realPath}\0${file.size}:${file.mtimeMs}:${file.ino}`
}

/** Whether `file` is `changed` or lies below it. */
function atOrBelow (file: string, changed: string): boolean {
  return file.startsWith(changed) && (file.length === changed.length || file.startsWith(path.sep, changed.length))
}

/**
 * Whether the cache entry under `key` is for `changed` or a file below it. Run on every entry at
 * every change, so it compares in place rather than cutting the path out of the key.
 */
function affectedBy (changed: string): (key: string) => boolean {
  return (key) => key.startsWith(changed) && (key.charCodeAt(changed.length) === 0 || key.startsWith(path.sep, changed.length))
}

interface Log {
  debug: (obj: object, msg: string) => void
  info: (obj: object, msg: string) => void
  warn: (obj: object, msg: string) => void
}

/** What to do about a watch that cannot be kept, by its error. */
function fixFor (err: NodeJS.ErrnoException): string {
  switch (err.code) {
    case 'ENOSPC':
      return 'raise the inotify watch limit (sysctl fs.inotify.max_user_watches) and restart the service'
    case 'EMFILE':
      return 'raise the inotify instance limit (sysctl fs.inotify.max_user_instances) or the open-file limit, and restart the service'
    default:
      return 'put public/ back in place and restart the service'
  }
}

/**
 * One `public/` folder being served (by one app, or several apps sharing its real path): its
 * path checks, its Content-Security-Policy, and the watch that keeps what is served from it in
 * memory fresh. Every change reported under the folder forgets the memoised resolutions, the
 * cached files at and below the changed path, and (through `epoch`) the hot paths into it; a
 * change of the external-resources file rebuilds the policy.
 *
 * When changes cannot be watched (no watch could be set up, or it failed later), one warning
 * names the app and the fix, and from then on every request is resolved on disk and files are
 * cached by size, mtime and inode (see `cacheKey`), so nothing stale is served from memory.
 */
export class Site {
  /** Changes on every change under the folder and every new policy: older hot paths are not used. */
  epoch = 0
  private watcher: FolderWatcher | undefined
  private cspReading: Promise<void> | undefined
  private cspStale = false
  private closed = false

  private constructor (
    readonly folder: PublicFolder,
    /** The app (or apps) served from it, for logs. */
    readonly label: string,
    public csp: string,
    private readonly cache: FileCache,
    private readonly log: Log
  ) {}

  static async open (folder: PublicFolder, label: string, cache: FileCache, log: Log): Promise<Site> {
    const site = new Site(folder, label, buildCsp(await loadAllowedOrigins(folder.root, label, log)), cache, log)
    const watcher = new FolderWatcher(folder.root, {
      change: (changed) => { site.changed(changed) },
      failure: (err) => { site.unwatched(err) }
    })
    try {
      watcher.start()
      site.watcher = watcher
    } catch (err) {
      site.unwatched(err as Error)
    }
    return site
  }

  /** Whether changes are watched (and so resolutions and hot paths may be kept). */
  get watching (): boolean {
    return this.watcher !== undefined
  }

  async close (): Promise<void> {
    this.closed = true
    this.watcher?.close()
    this.watcher = undefined
    await this.cspReading
  }

  private changed (changed: string): void {
    this.folder.forget()
    this.epoch++
    this.cache.invalidate(affectedBy(changed))
    const policyFile = path.join(this.folder.root, EXTERNAL_RESOURCES_FILE)
    if (atOrBelow(policyFile, changed)) this.reloadCsp()
  }

  private unwatched (err: NodeJS.ErrnoException): void {
    this.watcher = undefined
    this.folder.stopMemoising()
    this.epoch++
    this.cache.invalidate(affectedBy(this.folder.root))
    this.log.warn({ app: this.label, err },
      `app ${this.label}: changes under public/ cannot be watched (${err.message}); every request now checks its file on disk ` +
      `(stat) and ${EXTERNAL_RESOURCES_FILE} is no longer re-read. To watch again: ${fixFor(err)}`)
  }

  /** Reads the policy file again; changes during a read lead to one more read after it. */
  private reloadCsp (): void {
    if (this.cspReading !== undefined) {
      this.cspStale = true
      return
    }
    this.cspReading = (async () => {
      do {
        this.cspStale = false
        const origins = await loadAllowedOrigins(this.folder.root, this.label, this.log)
        if (this.closed) return
        this.csp = buildCsp(origins)
        this.epoch++
        this.log.info({ app: this.label, allowedOrigins: origins }, `app ${this.label}: ${EXTERNAL_RESOURCES_FILE} changed; its Content-Security-Policy is rebuilt`)
      } while (this.cspStale)
    })().catch((err) => {
      this.log.warn({ app: this.label, err }, `app ${this.label}: ${EXTERNAL_RESOURCES_FILE} changed but could not be re-read; the policy stays as it was`)
    }).finally(() => { this.cspReading = undefined })
  }
}
