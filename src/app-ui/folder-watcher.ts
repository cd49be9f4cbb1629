import fs from 'node:fs'
import path from 'node:path'

export interface FolderWatcherEvents {
  /** Something at `changed` (a file or a whole folder, and all below it) may differ from before. */
  change: (changed: string) => void
  /** The watcher stopped: changes are no longer reported. Called at most once. */
  failure: (err: Error) => void
}

/** Errors that mean the path is simply gone (or no longer a folder) by the time it is looked at. */
function gone (err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code
  return code === 'ENOENT' || code === 'ENOTDIR'
}

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
 * (possibly more than once, possibly as a change of a folder above it), until `failure`. A folder
 * is watched before it is listed, and its whole subtree is reported changed once it is watched, so
 * what was written in a new folder before its watch existed is reported too. All of this runs
 * synchronously within one event: no request is answered between a change being reported and the
 * watches it needs being in place.
 *
 * Not covered: an inotify queue overflow (more than `fs.inotify.max_queued_events` events unread),
 * which libuv drops without telling Node; it takes thousands of changes while the event loop is
 * blocked.
 *
 * Folders whose name starts with a dot are not watched (nothing in them is ever served); the root
 * is, and so are the dot files in it. Links are not followed (nothing served lies outside the root).
 */
export class FolderWatcher {
  private readonly folders = new Map<string, { watcher: fs.FSWatcher, ino: number }>()
  private stopped = false

  constructor (readonly root: string, private readonly events: FolderWatcherEvents) {}

  /** Watches the whole tree; throws (every watch closed) when that cannot be done. */
  start (): void {
    try {
      this.watchTree(this.root)
      if (!this.folders.has(this.root)) throw new Error(`${this.root} is not a folder`)
    } catch (err) {
      this.close()
      throw err
    }
  }

  close (): void {
    this.stopped = true
    for (const { watcher } of this.folders.values()) watcher.close()
    this.folders.clear()
  }

  private fail (err: Error): void {
    if (this.stopped) return
    this.close()
    this.events.failure(err)
  }

  private watchTree (folder: string): void {
    if (this.stopped || (folder !== this.root && path.basename(folder).startsWith('.'))) return
    let before: fs.Stats
    try {
      before = fs.lstatSync(folder)
    } catch (err) {
      if (gone(err)) return
      throw err
    }
    if (!before.isDirectory()) return
    const known = this.folders.get(folder)
    if (known !== undefined && known.ino === before.ino) return
    if (known !== undefined) this.unwatchTree(folder)
    const watcher = fs.watch(folder, { persistent: false }, (_event, name) => { this.changed(folder, name) })
    watcher.on('error', (err) => { this.fail(err) })
    // The watch is on whatever the path named when it was made: if the folder was swapped in the
    // meantime, say so (the parent's watch reports the swap, and this is watched again then).
    let after: fs.Stats | undefined
    try {
      after = fs.lstatSync(folder)
    } catch (err) {
      if (!gone(err)) throw err
    }
    this.folders.set(folder, { watcher, ino: after?.ino === before.ino ? before.ino : -1 })
    // Listed only now that it is watched: an entry made before the watch is found here, one made
    // after reaches the watch.
    let entries: fs.Dirent[]
    try {
      entries = fs.readdirSync(folder, { withFileTypes: true })
    } catch (err) {
      if (gone(err)) return
      throw err
    }
    for (const entry of entries) {
      if (entry.isDirectory()) this.watchTree(path.join(folder, entry.name))
    }
  }

  private unwatchTree (folder: string): void {
    const below = folder + path.sep
    for (const [watched, { watcher }] of this.folders) {
      if (watched !== folder && !watched.startsWith(below)) continue
      watcher.close()
      this.folders.delete(watched)
    }
  }

  /**
   * One event of the watch on `folder`: `name` is an entry in it, or (the folder itself removed
   * or moved) the folder's own name. Both the entry and the folder are looked at again.
   */
  private changed (folder: string, name: string | Buffer | null): void {
    if (this.stopped) return
    const entry = name === null ? folder : path.join(folder, name.toString())
    this.events.change(entry)
    try {
      this.recheck(folder)
      if (entry !== folder) this.recheck(entry)
    } catch (err) {
      this.fail(err as Error)
    }
  }

  /** Watches `target` if it is a folder not watched yet, lets go of it if it is no longer one. */
  private recheck (target: string): void {
    if (this.stopped) return
    const known = this.folders.get(target)
    let stat: fs.Stats | undefined
    try {
      stat = fs.lstatSync(target)
    } catch (err) {
      if (!gone(err)) throw err
    }
    const folder = stat?.isDirectory() === true
    if (known !== undefined && folder && stat?.ino === known.ino) return
    if (known === undefined && !folder) return
    if (target === this.root) throw new Error(`${this.root} was removed or replaced`)
    if (known !== undefined) this.unwatchTree(target)
    if (folder) this.watchTree(target)
    // Reported once the new watches are in place: whatever was written there before is read again.
    this.events.change(target)
  }
}
