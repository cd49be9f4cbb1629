import fs from 'node:fs'
import path from 'node:path'
import { EXTERNAL_RESOURCES_FILE } from '../app-ui/csp.js'
import { shownPath } from '../lib/shown-path.js'

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
  /**
   * Only this entry of `dir` counts, and `dir` is not entered: a folder that is not there yet or
   * may be removed (the apps folder, watched from its parent), whose appearing or going restarts.
   */
  only?: string
}

/**
 * Names that editors write beside the file they save, or instead of it for a moment: Emacs'
 * auto-save `#name#`, backups `name~`, vim's swap files when not hidden (`name.swp`, `.swo`…, and
 * `.swx`, its probe), JetBrains' safe write (`name___jb_tmp___`, `name___jb_old___`). Dot files
 * (`.name.swp`, Emacs' lock `.#name`) are ignored with every other dot file.
 */
const EDITORS_FILES = [/^#.*#$/, /~$/, /\.sw[a-px]$/, /___jb_(tmp|old)___$/]

/** vim checks that it may write in a folder by making and removing `4913` (or 4913 + 123 n, when that exists). */
function isVimProbe (name: string): boolean {
  return /^\d+$/.test(name) && Number(name) >= 4913 && (Number(name) - 4913) % 123 === 0
}

function ignoredName (name: string): boolean {
  return name.startsWith('.') || name === 'node_modules' || isVimProbe(name) || EDITORS_FILES.some((pattern) => pattern.test(name))
}

/**
 * Whether a change at `relative` (inside a watched folder) is one the service must restart for.
 * Dot files and folders are editors' swap files, `.git` and the like; `node_modules` changes in
 * bulk during an install (a restart after it is the user's to ask for); editors' temporary and
 * backup files come with a save of the file itself, which is what restarts.
 */
export function restartsFor (relative: string, folder: WatchedFolder): boolean {
  const parts = relative.split(/[\\/]/).filter(Boolean)
  if (parts.length === 0) return false
  if (folder.only !== undefined) return parts.length === 1 && parts[0] === folder.only
  const inPublic = folder.publicAt !== undefined && parts[folder.publicAt] === 'public' && parts.length > folder.publicAt + 1
  // An app's Content-Security-Policy is computed from this file at start.
  if (inPublic) return parts.length === folder.publicAt! + 2 && parts.at(-1) === EXTERNAL_RESOURCES_FILE
  return !parts.some(ignoredName)
}

/**
 * The app folder that a change at `relative` (one `restartsFor` counts) can be reloaded in place
 * for, as the service names it (in the apps folder, a linked one by its link); undefined when the
 * service must restart: a change in src/, the apps folder or an app folder itself appearing or
 * going, an app's `public/` appearing or going or its CSP source (both read at start).
 */
export function inPlaceFolder (relative: string, folder: WatchedFolder): string | undefined {
  const parts = relative.split(/[\\/]/).filter(Boolean)
  if (folder.service === true || folder.only !== undefined || folder.publicAt === undefined) return undefined
  const inApp = parts.slice(folder.publicAt)
  if (inApp.length === 0 || inApp[0] === 'public') return undefined
  return folder.publicAt === 1 ? path.join(folder.dir, parts[0]) : folder.shownAs ?? folder.dir
}

interface Closable { close: () => void }

interface Tree extends Closable {
  /** Whether its folder was removed (or could not be watched): it sees nothing more. */
  gone: () => boolean
}

export interface ChangeWatcher extends Closable {
  /**
   * Watches these folders from now on: one already watched stays as it is, unless it has been
   * replaced on disk since (removed and made again); the others are closed.
   */
  update: (folders: readonly WatchedFolder[]) => void
}

/** An app folder to reload in place, and the file changed in it (its path as the user knows it). */
export interface AppFolderChange { folder: string, file: string }

/** A burst of changes: the first file changed (its path as the user knows it), and when it was seen. */
export interface Change {
  file: string
  seenAt: number
  /** Whether the burst changed the service's own code (any file of it, not only the first). */
  service: boolean
  /** The app folders changed, when nothing else was (see `inPlaceFolder`); undefined: the service restarts. */
  inPlace: AppFolderChange[] | undefined
}

/** One change for two that came before either was acted on: what either needs, named by the later. */
export function mergeChanges (earlier: Change | undefined, later: Change): Change {
  if (earlier === undefined) return later
  const both = earlier.inPlace === undefined || later.inPlace === undefined ? undefined : [...earlier.inPlace, ...later.inPlace]
  const inPlace = both === undefined ? undefined : [...new Map(both.map((change) => [change.folder, change])).values()]
  return { ...later, service: earlier.service || later.service, inPlace }
}

export interface WatchOptions {
  debounceMs: number
  onChange: (change: Change) => void
  /** A folder that cannot be watched for another reason than being gone (ENOSPC: the system's limit of watches). */
  onError: (err: NodeJS.ErrnoException, dir: string) => void
}

/**
 * Watches `folders` and calls `onChange` once a burst of changes has settled for `debounceMs` (an
 * editor's save is often several events: a write, a rename, a chmod).
 */
export function watchChanges (folders: readonly WatchedFolder[], { debounceMs, onChange, onError }: WatchOptions): ChangeWatcher {
  /** The files changed (real path to shown path), and those of each app folder while nothing needs a restart. */
  let burst: { files: Map<string, string>, apps: Map<string, Map<string, string>> | undefined, seenAt: number, service: boolean } | undefined
  let timer: NodeJS.Timeout | undefined
  const seen = (folder: WatchedFolder, relative: string): void => {
    if (!restartsFor(relative, folder)) return
    burst ??= { files: new Map(), apps: new Map(), seenAt: Date.now(), service: false }
    const real = path.join(folder.dir, relative)
    const shown = path.join(folder.shownAs ?? folder.dir, relative)
    burst.files.set(real, shown)
    burst.service ||= folder.service === true
    const app = inPlaceFolder(relative, folder)
    if (app === undefined) burst.apps = undefined
    else burst.apps?.set(app, (burst.apps.get(app) ?? new Map<string, string>()).set(real, shown))
    clearTimeout(timer)
    timer = setTimeout(() => {
      const { files, apps, seenAt, service } = burst!
      burst = undefined
      const inPlace = apps === undefined ? undefined : [...apps].map(([app, changed]) => ({ folder: app, file: named(changed) }))
      onChange({ file: named(files), seenAt, service, inPlace })
    }, debounceMs)
  }
  let trees = new Map<string, Tree>()
  const update = (next: readonly WatchedFolder[]): void => {
    const kept = new Map<string, Tree>()
    for (const folder of next) {
      const key = JSON.stringify(folder)
      if (kept.has(key)) continue
      let tree = trees.get(key)
      trees.delete(key)
      // A folder removed since (and perhaps made again) is watched anew.
      if (tree?.gone() === true) {
        tree.close()
        tree = undefined
      }
      tree ??= watchTree(folder.dir, folder.only, (relative) => { seen(folder, relative) }, onError)
      kept.set(key, tree)
    }
    for (const tree of trees.values()) tree.close()
    trees = kept
  }
  update(folders)
  return {
    update,
    close: () => {
      clearTimeout(timer)
      for (const tree of trees.values()) tree.close()
      trees.clear()
    }
  }
}

/**
 * The file to name a burst by: the first one still there (a save that writes aside and renames
 * over the file leaves its temporary file's events first), as the user knows its path.
 */
function named (files: ReadonlyMap<string, string>): string {
  const [, shown] = [...files].find(([real]) => fs.existsSync(real)) ?? [...files][0]
  return shownPath(shown)
}

/** What the dev loop says, once, when a folder cannot be watched: ENOSPC comes with its fix. */
export function watchFailure (err: NodeJS.ErrnoException, dir: string): string {
  if (err.code === 'ENOSPC') {
    return `cannot watch ${dir}: the system's limit of file watches is reached (ENOSPC), so changes there restart nothing. ` +
      'Raise it (sudo sysctl fs.inotify.max_user_watches=524288, and the same line in /etc/sysctl.conf to keep it), then restart npm run dev'
  }
  return `cannot watch ${dir} (${err.code ?? err.message}): changes there restart nothing`
}

/** Gone (or replaced by a file) is no error: the folder is watched again once it is back. */
function isGone (err: NodeJS.ErrnoException): boolean {
  return err.code === 'ENOENT' || err.code === 'ENOTDIR' || err.code === 'EPERM'
}

/**
 * Calls `onEvent` with the path (relative to `root`) of each file or folder changed under it, or
 * only of its entry `only`, not entering it.
 * One watcher per folder, not `fs.watch(root, { recursive: true })`: on Linux, Node 20's recursive
 * watch follows files, and loses one that an editor replaces on save (write aside, rename over:
 * `sed -i`, "safe write"), so every save after the first went unseen. A folder's watcher sees
 * such a rename as an event of the folder. Dot folders and node_modules are not entered.
 */
function watchTree (root: string, only: string | undefined, onEvent: (relative: string) => void, onError: WatchOptions['onError']): Tree {
  const watchers = new Map<string, fs.FSWatcher>()
  const unwatch = (dir: string): void => {
    for (const [folder, watcher] of watchers) {
      if (folder === dir || folder.startsWith(dir + path.sep)) {
        watcher.close()
        watchers.delete(folder)
      }
    }
  }
  /** `arrived`: a folder made or moved in since the start, whose entries are changes too (made before it was watched). */
  const watch = (dir: string, arrived = false): void => {
    if (watchers.has(dir)) return
    let watcher: fs.FSWatcher
    try {
      watcher = fs.watch(dir, (_event, name) => {
        // Some platforms may not say which entry changed: the folder itself then counts.
        const full = name === null ? dir : path.join(dir, name.toString())
        // The watched folder itself removed (or moved away) is an event named as it is.
        if (dir === root && path.basename(full) === path.basename(root) && !fs.existsSync(full)) unwatch(root)
        if (only !== undefined) {
          if (path.basename(full) === only) onEvent(only)
          return
        }
        if (full !== dir) {
          // A folder created or moved in is watched from now on; one removed or moved away, no longer.
          if (isEnterable(full)) watch(full, true)
          else if (watchers.has(full)) unwatch(full)
        }
        onEvent(path.relative(root, full))
      })
    } catch (err) {
      if (!isGone(err as NodeJS.ErrnoException)) onError(err as NodeJS.ErrnoException, dir)
      return
    }
    watcher.on('error', (err: NodeJS.ErrnoException) => {
      unwatch(dir)
      if (!isGone(err)) onError(err, dir)
    })
    watchers.set(dir, watcher)
    if (only !== undefined) return
    const entries = (() => { try { return fs.readdirSync(dir, { withFileTypes: true }) } catch { return [] } })()
    for (const entry of entries) {
      const full = path.join(dir, entry.name)
      if (arrived) onEvent(path.relative(root, full))
      if (entry.isDirectory() && isEnterable(full)) watch(full, arrived)
    }
  }
  const isEnterable = (full: string): boolean => {
    const name = path.basename(full)
    if (name.startsWith('.') || name === 'node_modules') return false
    try {
      // Not following links: an app folder linked into the apps folder is a folder of its own to
      // watch, named by its link (see WatchedFolder.shownAs).
      return fs.lstatSync(full).isDirectory()
    } catch {
      return false
    }
  }
  watch(root)
  return { close: () => { unwatch(root) }, gone: () => !watchers.has(root) }
}
