import fs from 'node:fs'
import path from 'node:path'
import { atOrBelow } from '../lib/path-below.js'

/**
 * What a change may have touched: `content`, only the content or metadata of the regular file at
 * the path (its name still names the same file, which has no other name); `entry`, also what the
 * name names (made, removed, renamed; a file or a link, neither a folder before nor now); `tree`,
 * a folder and everything below it.
 */
export type ChangeKind = 'content' | 'entry' | 'tree'

export interface FolderWatcherEvents {
  /** Something at `changed` may differ from before, as far as `kind` says. */
  change: (changed: string, kind: ChangeKind) => void
  /**
   * The watcher stopped: changes are no longer reported. `rootChanged`: because the root itself
   * was removed or replaced (anything else: a watch could not be made). Called at most once.
   */
  failure: (err: Error, rootChanged: boolean) => void
}

/** Errors that mean the path is simply gone (or no longer a folder) by the time it is looked at. */
function gone (err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code
  return code === 'ENOENT' || code === 'ENOTDIR'
}

function denied (err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code
  return code === 'EACCES' || code === 'EPERM'
}

/** Which folder a path names: an inode number alone is not enough, file systems reuse them at once. */
interface Identity { dev: bigint, ino: bigint, born: bigint }

/** What is at `entry` now (links not followed), or undefined if nothing this process may see. */
function entryAt (entry: string): fs.BigIntStats | undefined {
  try {
    return fs.lstatSync(entry, { bigint: true })
  } catch (err) {
    if (gone(err) || denied(err)) return undefined
    throw err
  }
}

/** The identity of the folder `stat` describes, or undefined if it is none. */
function identityOf (stat: fs.BigIntStats | undefined): Identity | undefined {
  if (stat?.isDirectory() !== true) return undefined
  // Without a birth time (some file systems), the change time still differs for a folder made anew.
  return { dev: stat.dev, ino: stat.ino, born: stat.birthtimeNs !== 0n ? stat.birthtimeNs : stat.ctimeNs }
}

/** The identity of the folder at `folder` (links not followed), or undefined if none is there now. */
function folderAt (folder: string): Identity | undefined {
  return identityOf(entryAt(folder))
}

function same (a: Identity, b: Identity): boolean {
  return a.dev === b.dev && a.ino === b.ino && a.born === b.born
}

/** The root was removed or replaced: what to watch is for the owner to find out again. */
export class RootChanged extends Error {}

/**
 * Reports every change below one folder: one non-recursive `fs.watch` per folder (on Linux an
 * inotify watch on a folder reports writes, creations, removals and renames of every entry in it).
 *
 * Not Node's `fs.watch(root, { recursive: true })`: on Linux (Node 20) it watches each file's
 * inode, and after an editor's save by rename it reports neither later writes to the file nor its
 * removal. Not chokidar: it lists a new folder before it watches it (a file written in between is
 * never reported) and drops change events 5 ms apart.
 *
 * Guarantees: once `start` has returned, every change below the root is reported after it happened
 * (possibly more than once, possibly as a change of a folder above it), until `failure`, except
 * below a folder `sees` answers false for. A folder is watched before it is listed, and its whole
 * subtree is reported changed once it is watched, so what was written in a new folder before its
 * watch existed is reported too. Every event naming a folder (made, removed, renamed, its
 * permissions changed) watches it anew, whatever its inode number: a folder removed and made again
 * may get the same one, and the old watch then reports nothing. All of this runs synchronously
 * within one event: no request is answered between a change being reported and the watches it
 * needs being in place.
 *
 * Never watches outside the root: a folder is kept watched only if, after its watch was made, its
 * path is still the same folder (not swapped for a link in between) and its real path is itself.
 *
 * Not covered: an inotify queue overflow (more than `fs.inotify.max_queued_events` events unread),
 * which libuv drops without telling Node; it takes thousands of changes while the event loop is
 * blocked. A folder this process may not read cannot be watched: `sees` answers false below it
 * (until an event on it lets it be watched), and the watcher carries on with the rest.
 *
 * Folders whose name starts with a dot are not watched (nothing in them is ever served); the root
 * is, and so are the dot files in it. Links are not followed (nothing served lies outside the root).
 */
export class FolderWatcher {
  private readonly folders = new Map<string, { watcher: fs.FSWatcher, id: Identity }>()
  /** Folders that could not be watched for want of permission. */
  private readonly blind = new Set<string>()
  private stopped = false

  constructor (readonly root: string, private readonly events: FolderWatcherEvents) {}

  /** Watches the whole tree; throws (every watch closed) when that cannot be done. */
  start (): void {
    try {
      this.watchTree(this.root)
      if (this.blind.has(this.root)) throw Object.assign(new Error(`${this.root} may not be read`), { code: 'EACCES' })
      if (!this.folders.has(this.root)) throw new Error(`${this.root} is not a folder that can be watched`)
    } catch (err) {
      this.close()
      throw err
    }
  }

  close (): void {
    this.stopped = true
    for (const { watcher } of this.folders.values()) watcher.close()
    this.folders.clear()
    this.blind.clear()
  }

  /** How many folders are watched (for tests and diagnostics). */
  get size (): number {
    return this.folders.size
  }

  /** Whether a change at `file` is reported (false below a folder that could not be watched). */
  sees (file: string): boolean {
    if (this.stopped) return false
    for (const folder of this.blind) if (atOrBelow(file, folder)) return false
    return true
  }

  private fail (err: Error): void {
    if (this.stopped) return
    this.close()
    this.events.failure(err, err instanceof RootChanged)
  }

  /** `known`: the identity of the folder at `folder`, looked at just now by the caller. */
  private watchTree (folder: string, known?: Identity): void {
    if (this.stopped || (folder !== this.root && path.basename(folder).startsWith('.'))) return
    const before = known ?? folderAt(folder)
    if (before === undefined) return
    let watcher: fs.FSWatcher
    try {
      watcher = fs.watch(folder, { persistent: false }, (event, name) => { this.changed(folder, watcher, event, name) })
    } catch (err) {
      // Gone already (a folder made and removed at once): its parent's event reported that.
      this.cannotRead(folder, err)
      return
    }
    watcher.on('error', (err) => { if (this.folders.get(folder)?.watcher === watcher) this.fail(err) })
    // The watch is on whatever the path named when it was made (fs.watch follows links): kept only
    // if that is still this folder, inside the root. If it was swapped meanwhile, the parent's
    // watch reports the swap, and what is there then is looked at.
    let real: string | undefined
    try {
      real = fs.realpathSync.native(folder)
    } catch (err) {
      if (!gone(err) && !denied(err)) {
        watcher.close()
        throw err
      }
    }
    const after = folderAt(folder)
    if (real !== folder || after === undefined || !same(before, after)) {
      watcher.close()
      if (folder === this.root) throw new RootChanged(`${this.root} was replaced while being watched`)
      return
    }
    this.folders.set(folder, { watcher, id: after })
    // Listed only now that it is watched: an entry made before the watch is found here, one made
    // after reaches the watch.
    let entries: fs.Dirent[]
    try {
      entries = fs.readdirSync(folder, { withFileTypes: true })
    } catch (err) {
      this.cannotRead(folder, err)
      return
    }
    for (const entry of entries) {
      if (entry.isDirectory()) this.watchTree(path.join(folder, entry.name))
    }
  }

  /** `folder` could not be watched or listed: gone is no error, denied leaves it unseen, anything else is thrown. */
  private cannotRead (folder: string, err: unknown): void {
    if (gone(err)) return
    if (denied(err)) this.blind.add(folder)
    else throw err
  }

  private unwatchTree (folder: string): void {
    for (const [watched, { watcher }] of this.folders) {
      if (!atOrBelow(watched, folder)) continue
      watcher.close()
      this.folders.delete(watched)
    }
    for (const watched of this.blind) if (atOrBelow(watched, folder)) this.blind.delete(watched)
  }

  /**
   * One event of the watch on `folder`: `name` is an entry in it, or (the folder itself removed,
   * moved or changed) the folder's own name. The entry is looked at again, and so is the folder
   * when the event may be its own.
   */
  private changed (folder: string, watcher: fs.FSWatcher, event: string, name: string | Buffer | null): void {
    // A watch let go of (its folder watched anew) may still deliver what was queued for it.
    if (this.stopped || this.folders.get(folder)?.watcher !== watcher) return
    const entry = name === null ? folder : path.join(folder, name.toString())
    try {
      const replaced = (entry === folder || path.basename(entry) === path.basename(folder)) && this.recheck(folder)
      if (replaced || entry === folder) {
        this.events.change(folder, 'tree')
        return
      }
      // An entry that is or was a folder is watched anew.
      const stat = entryAt(entry)
      const now = identityOf(stat)
      const wasFolder = this.folders.has(entry) || this.blind.has(entry)
      if (wasFolder) this.unwatchTree(entry)
      if (now !== undefined) this.watchTree(entry, now)
      if (wasFolder || now !== undefined) this.events.change(entry, 'tree')
      else this.events.change(entry, event === 'change' && stat?.isFile() === true && stat.nlink === 1n ? 'content' : 'entry')
    } catch (err) {
      this.fail(err as Error)
    }
  }

  /** The watched folder itself, after an event that may be its own: still the folder watched? */
  private recheck (folder: string): boolean {
    const known = this.folders.get(folder)
    if (known === undefined) return false
    const now = folderAt(folder)
    if (now !== undefined && same(now, known.id)) return false
    if (folder === this.root) throw new RootChanged(`${this.root} was removed or replaced`)
    this.unwatchTree(folder)
    if (now !== undefined) this.watchTree(folder, now)
    return true
  }
}
