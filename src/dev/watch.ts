import fs from 'node:fs'
import path from 'node:path'
import { EXTERNAL_RESOURCES_FILE } from '../app-ui/csp.js'

/** A folder to watch, and the rule for what in it is no reason to restart. */
export interface WatchedFolder {
  dir: string
  /** The service's own code: a change there makes a service process that imported it stale. */
  service?: boolean
  /** The path to name changed files by, when not `dir` (an app folder linked into the apps folder). */
  shownAs?: string
  /**
   * Where an app's `public/` sits in a changed file's path: 1 in the apps folder, 0 in an app
   * folder. Its files are served fresh by the running service, so they never restart it.
   */
  publicAt?: 0 | 1
}

/**
 * Whether a change at `relative` (inside a watched folder) is one the service must restart for.
 * Dot files and folders are editors' swap files, `.git` and the like; `node_modules` changes in
 * bulk during an install (a restart after it is the user's to ask for); `name~` is a backup file.
 */
export function restartsFor (relative: string, folder: WatchedFolder): boolean {
  const parts = relative.split(/[\\/]/).filter(Boolean)
  if (parts.length === 0) return false
  const inPublic = folder.publicAt !== undefined && parts[folder.publicAt] === 'public' && parts.length > folder.publicAt + 1
  // An app's Content-Security-Policy is computed from this file at start.
  if (inPublic) return parts.length === folder.publicAt! + 2 && parts.at(-1) === EXTERNAL_RESOURCES_FILE
  return !parts.some((p) => p.startsWith('.') || p === 'node_modules' || p.endsWith('~'))
}

export interface ChangeWatcher {
  close: () => void
}

/** A burst of changes: the first file changed (its path as the user knows it), and when it was seen. */
export interface Change {
  file: string
  seenAt: number
  /** Whether the burst changed the service's own code (any file of it, not only the first). */
  service: boolean
}

/**
 * Watches `folders` and calls `onChange` once a burst of changes has settled for `debounceMs` (an
 * editor's save is often several events: a write, a rename, a chmod).
 */
export function watchChanges (folders: readonly WatchedFolder[], debounceMs: number, onChange: (change: Change) => void): ChangeWatcher {
  let burst: { files: Map<string, string>, seenAt: number, service: boolean } | undefined
  let timer: NodeJS.Timeout | undefined
  const trees = folders.map((folder) => watchTree(folder.dir, (relative) => {
    if (!restartsFor(relative, folder)) return
    burst ??= { files: new Map(), seenAt: Date.now(), service: false }
    burst.files.set(path.join(folder.dir, relative), path.join(folder.shownAs ?? folder.dir, relative))
    burst.service ||= folder.service === true
    clearTimeout(timer)
    timer = setTimeout(() => {
      const { files, seenAt, service } = burst!
      burst = undefined
      // Named by a file still there: a save that writes aside and renames over the file leaves
      // its temporary file's events first.
      const named = [...files].find(([real]) => fs.existsSync(real)) ?? [...files][0]
      onChange({ file: shown(named[1]), seenAt, service })
    }, debounceMs)
  }))
  return {
    close: () => {
      clearTimeout(timer)
      for (const tree of trees) tree.close()
    }
  }
}

/**
 * Calls `onEvent` with the path (relative to `root`) of each file or folder changed under it.
 * One watcher per folder, not `fs.watch(root, { recursive: true })`: on Linux, Node 20's recursive
 * watch follows files, and loses one that an editor replaces on save (write aside, rename over:
 * `sed -i`, "safe write"), so every save after the first went unseen. A folder's watcher sees
 * such a rename as an event of the folder. Dot folders and node_modules are not entered.
 */
function watchTree (root: string, onEvent: (relative: string) => void): ChangeWatcher {
  const watchers = new Map<string, fs.FSWatcher>()
  const unwatch = (dir: string): void => {
    for (const [folder, watcher] of watchers) {
      if (folder === dir || folder.startsWith(dir + path.sep)) {
        watcher.close()
        watchers.delete(folder)
      }
    }
  }
  const watch = (dir: string): void => {
    if (watchers.has(dir)) return
    let watcher: fs.FSWatcher
    try {
      watcher = fs.watch(dir, (_event, name) => {
        // Some platforms may not say which entry changed: the folder itself then counts.
        const full = name === null ? dir : path.join(dir, name.toString())
        if (full !== dir) {
          // A folder created or moved in is watched from now on; one removed or moved away, no longer.
          if (isEnterable(full)) watch(full)
          else if (watchers.has(full)) unwatch(full)
        }
        onEvent(path.relative(root, full))
      })
    } catch {
      return // gone already
    }
    watcher.on('error', () => { unwatch(dir) })
    watchers.set(dir, watcher)
    const entries = (() => { try { return fs.readdirSync(dir, { withFileTypes: true }) } catch { return [] } })()
    for (const entry of entries) {
      const full = path.join(dir, entry.name)
      if (entry.isDirectory() && isEnterable(full)) watch(full)
    }
  }
  const isEnterable = (full: string): boolean => {
    const name = path.basename(full)
    if (name.startsWith('.') || name === 'node_modules') return false
    try {
      return fs.lstatSync(full).isDirectory()
    } catch {
      return false
    }
  }
  watch(root)
  return { close: () => { unwatch(root) } }
}

/** Relative to the working folder when inside it (`reaktor-apps/x/index.js`), else absolute. */
function shown (file: string): string {
  const relative = path.relative(process.cwd(), file)
  return relative === '' || relative.startsWith('..') || path.isAbsolute(relative) ? file : relative
}
