import fs from 'node:fs'
import path from 'node:path'
import { atOrBelow } from '../lib/path-below.js'
import { buildCsp, EXTERNAL_RESOURCES_FILE, loadAllowedOrigins } from './csp.js'
import type { FileCache } from './file-cache.js'
import { FolderWatcher, RootChanged, type ChangeKind } from './folder-watcher.js'
import { PublicFolder, type Resolution } from './safe-path.js'

/**
 * The cache key of one content of a file: its real path and the size, mtime, ctime and inode it
 * had when resolved. While changes are watched, an entry is invalidated by path as soon as its
 * file changes; when they cannot be, a file resolved afresh after any change of its content
 * (a save by rename, or a copy keeping size and mtime: the ctime still moves) simply misses the
 * entries of its earlier contents.
 */
export function cacheKey (file: Extract<Resolution, { kind: 'file' }>): string {
  return `${file.realPath}\0${file.size}:${file.mtimeMs}:${file.ctimeMs}:${file.ino}`
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
    case 'EACCES':
    case 'EPERM':
      return 'let the service\'s user read public/ and restart the service'
    default:
      return 'put public/ back in place (it is watched again once replaced) or restart the service'
  }
}

/**
 * One `public/` folder being served (by one app, or several apps sharing its path): its path
 * checks, its Content-Security-Policy, and the watch that keeps what is served from it in memory
 * fresh.
 *
 * Every change reported under the folder drops the cached entries of the changed file and the
 * memoised resolutions at once (both cheap), and leaves the hot paths of other files alone. A name
 * made, removed or renamed (which may lead other paths elsewhere) also stops every hot path into
 * the folder (through `epoch`); a folder, also every cached file below it, dropped at the next
 * request or the next turn of the event loop, whichever comes first (one pass for all the changes
 * in between). A change of the external-resources file (or any change while it is a link)
 * rebuilds the policy.
 *
 * The entry of `public/` in its parent folder is watched too: when `public/` is removed, made
 * again, renamed, or (a link) pointed elsewhere, the site opens it anew at its new real path, with
 * new watches and the policy read again; while there is none, every request answers 404.
 *
 * While a policy read or a re-opening is under way, `settled` is a promise requests wait for.
 *
 * When changes cannot be watched (a watch limit reached), one warning names the app and the fix,
 * and from then on every request is resolved on disk and files are cached by size, times and
 * inode (see `cacheKey`), so nothing stale is served from memory. A folder below the root that
 * cannot be watched (no permission to read it) has that treatment alone.
 */
export class Site {
  /** Changes with every change that may affect other paths, and every new policy: older hot paths are not used. */
  epoch = 0
  csp = buildCsp([])
  /** Request paths checked on disk (not answered from the memo). */
  pathChecks = 0
  folder = PublicFolder.none()
  private watcher: FolderWatcher | undefined
  private entryWatch: fs.FSWatcher | undefined
  private busy: Promise<void> | undefined
  private reopenWanted = false
  private policyWanted = false
  private policyIsLink = false
  /** Whether a policy that differs is logged (not the first, read at start). */
  private announce = false
  /** Folders whose cached files are still to be dropped. */
  private readonly dropBelow = new Set<string>()
  private dropScheduled = false
  private state: 'watched' | 'unwatched' | 'gone' = 'watched'
  private closed = false

  private constructor (
    /** The configured path of `public/` (which may be a link). */
    readonly publicDir: string,
    /** The app (or apps) served from it, for logs. */
    readonly label: string,
    private readonly cache: FileCache,
    private readonly log: Log
  ) {}

  /** The site of `publicDir`; rejects when it is missing or not a folder at start. */
  static async open (publicDir: string, label: string, cache: FileCache, log: Log): Promise<Site> {
    const site = new Site(publicDir, label, cache, log)
    site.folder = await site.openFolder()
    site.entryWatch = site.watchEntry()
    // Watched before the policy is read: a change of it during the read leads to another read.
    site.startWatching()
    site.refresh(false)
    await site.settled()
    site.announce = true
    return site
  }

  /** Whether changes are watched (and so resolutions and hot paths may be kept). */
  get watching (): boolean {
    return this.watcher !== undefined
  }

  /** Whether what is at `realPath` is kept fresh by the watch (and so may be on a hot path). */
  watches (realPath: string): boolean {
    return this.watcher?.sees(realPath) === true
  }

  /** Waits for a policy read or re-opening under way; afterwards, what is served is current. */
  async settled (): Promise<void> {
    while (this.busy !== undefined) await this.busy
  }

  /** Whether a request must wait for `settled` before using the folder or the policy. */
  get unsettled (): boolean {
    return this.busy !== undefined
  }

  /** Drops now the cached files still to be dropped (before a request uses the cache). */
  dropPending (): void {
    if (this.dropBelow.size === 0) return
    this.cache.invalidateBelow(this.dropBelow)
    this.dropBelow.clear()
  }

  async close (): Promise<void> {
    this.closed = true
    // Hot paths into a closed site (a deleted version's) are answered no more.
    this.epoch++
    this.watcher?.close()
    this.watcher = undefined
    this.entryWatch?.close()
    await this.settled()
  }

  /**
   * Watches the entry of `public/` in its parent: a link flipped to another release, a folder
   * removed or put back are all events there, and none reaches the watch of the folder itself.
   */
  private watchEntry (): fs.FSWatcher | undefined {
    const name = path.basename(this.publicDir)
    try {
      const watcher = fs.watch(path.dirname(this.publicDir), { persistent: false }, (_event, entry) => {
        if (entry === null || entry.toString() === name) this.refresh(true)
      })
      watcher.on('error', (err) => { this.log.debug({ app: this.label, err }, `app ${this.label}: the folder holding public/ is no longer watched`) })
      return watcher
    } catch (err) {
      this.log.debug({ app: this.label, err }, `app ${this.label}: the folder holding public/ cannot be watched; public/ itself is replaced only at the next start`)
      return undefined
    }
  }

  private async openFolder (): Promise<PublicFolder> {
    return await PublicFolder.open(this.publicDir, { memoisable: (realPath) => this.watches(realPath), onLookup: () => { this.pathChecks++ } })
  }

  private startWatching (): void {
    const root = this.folder.root
    const watcher = new FolderWatcher(root, {
      change: (changed, kind) => { this.changed(changed, kind) },
      failure: (err, rootChanged) => {
        if (this.watcher !== watcher) return
        if (rootChanged) this.refresh(true)
        else this.unwatched(err)
      }
    })
    try {
      watcher.start()
      this.watcher = watcher
      if (this.state !== 'watched') this.log.info({ app: this.label, root }, `app ${this.label}: changes under public/ (${root}) are watched again`)
      this.state = 'watched'
    } catch (err) {
      if (err instanceof RootChanged) this.refresh(true)
      else this.unwatched(err as Error)
    }
  }

  private changed (changed: string, kind: ChangeKind): void {
    // New content in a file: its cached entries go, the rest (hot paths of other files) stays.
    this.cache.invalidateFile(changed)
    this.folder.forget()
    // A name made, removed or pointed elsewhere may change where other paths lead.
    if (kind !== 'content') this.epoch++
    if (kind === 'tree') {
      this.dropBelow.add(changed)
      if (!this.dropScheduled) {
        this.dropScheduled = true
        setImmediate(() => {
          this.dropScheduled = false
          this.dropPending()
        })
      }
    }
    const policyFile = path.join(this.folder.root, EXTERNAL_RESOURCES_FILE)
    if (this.policyIsLink || atOrBelow(policyFile, changed)) this.refresh(false)
  }

  /** Nothing more is reported from the watch, and no path check is memoised from now on. */
  private stopWatching (): void {
    this.watcher?.close()
    this.watcher = undefined
    this.folder.stopMemoising()
  }

  private unwatched (err: NodeJS.ErrnoException): void {
    this.stopWatching()
    this.epoch++
    this.dropBelow.add(this.folder.root)
    this.dropPending()
    if (this.state === 'unwatched') return
    this.state = 'unwatched'
    this.log.warn({ app: this.label, err },
      `app ${this.label}: changes under public/ cannot be watched (${err.message}); every request now checks its file on disk ` +
      `(stat) and ${EXTERNAL_RESOURCES_FILE} is no longer re-read. To watch again: ${fixFor(err)}`)
  }

  /**
   * Asks for the folder to be opened anew (`reopen`) and for the policy to be read again. Stale
   * hot paths are stopped at once; the work runs in one loop, so changes while it runs lead to
   * one more round.
   */
  private refresh (reopen: boolean): void {
    if (this.closed) return
    this.epoch++
    if (reopen) {
      this.reopenWanted = true
      // Nothing more is reported from the old root, and nothing of it is kept.
      this.stopWatching()
    }
    this.policyWanted = true
    if (this.busy !== undefined) return
    this.busy = this.settle().catch((err) => {
      this.log.warn({ app: this.label, err }, `app ${this.label}: public/ or ${EXTERNAL_RESOURCES_FILE} changed but could not be read again; the policy stays as it was`)
    }).finally(() => { this.busy = undefined })
  }

  private async settle (): Promise<void> {
    while (!this.closed && (this.reopenWanted || this.policyWanted)) {
      if (this.reopenWanted) {
        this.reopenWanted = false
        await this.reopen()
        continue
      }
      this.policyWanted = false
      const root = this.folder.root
      const origins = root === '' ? [] : await loadAllowedOrigins(root, this.label, this.log)
      this.policyIsLink = root !== '' && await isLink(path.join(root, EXTERNAL_RESOURCES_FILE))
      if (this.closed || this.reopenWanted || this.policyWanted) continue
      const csp = buildCsp(origins)
      if (csp === this.csp) continue
      this.csp = csp
      this.epoch++
      if (this.announce) this.log.info({ app: this.label, allowedOrigins: origins }, `app ${this.label}: ${EXTERNAL_RESOURCES_FILE} changed; its Content-Security-Policy is rebuilt`)
    }
  }

  private async reopen (): Promise<void> {
    const old = this.folder.root
    let folder: PublicFolder
    try {
      folder = await this.openFolder()
    } catch (err) {
      folder = PublicFolder.none()
      if (this.state !== 'gone') {
        this.log.warn({ app: this.label, err }, `app ${this.label}: public/ folder ${this.publicDir} is gone; its UI answers 404 until it is back`)
      }
      this.state = 'gone'
    }
    if (this.closed) return
    if (folder.root !== '' && folder.root !== old) {
      this.log.info({ app: this.label, root: folder.root }, `app ${this.label}: public/ is now ${folder.root}; served from there`)
    }
    this.folder = folder
    this.epoch++
    if (old !== '') {
      this.dropBelow.add(old)
      this.dropPending()
    }
    if (folder.root !== '') this.startWatching()
  }
}

async function isLink (file: string): Promise<boolean> {
  try {
    return (await fs.promises.lstat(file)).isSymbolicLink()
  } catch {
    return false
  }
}
