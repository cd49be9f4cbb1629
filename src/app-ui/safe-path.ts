/**
 * The path-security boundary of app UIs: which file on disk, if any, a request path inside one
 * app's `public/` folder names. Everything the service serves from `public/` has passed here.
 *
 * Guarantees, for any segments without a NUL byte passed to `resolve` (even `..`, `/`, empty or
 * dot segments; a NUL makes Node's file calls throw, and `parseAppUiUrl` refuses it first):
 * - The root is the real path of `public/`, taken once by `PublicFolder.open` (a `public/` that
 *   is itself a symbolic link is followed there, once: when `public/` is replaced, the caller
 *   opens a new `PublicFolder`); `open` fails unless it is a folder. `PublicFolder.none()` stands
 *   for a `public/` that is gone and answers `missing` to everything.
 * - The segments are joined onto the root (`path.join`: `..` drops the segment before it) and the
 *   result's real path is taken: every symbolic link in every component is resolved, to its final
 *   target. The answer is `forbidden` unless that real path is the root itself or lies below it (a
 *   prefix check on whole components: `public-old/` is not below `public/`), and `forbidden` if any
 *   component of it below the root starts with a dot. So `..` never climbs out, a link whose final
 *   target is outside `public/` is refused, and so is a link to a dot file or into a dot folder; a
 *   link that ends inside `public/` at names without a leading dot is followed.
 * - `file`: `realPath` is that checked real path (no links left in it) and names a regular file
 *   (`fs.stat`); `size` and `mtimeMs` are its own. Devices, sockets, FIFOs: `missing`.
 * - A folder: `folder` (the caller redirects to the slashed form) when asked without a trailing
 *   slash; with one, its `index.html`, itself checked by the same rules (a linked `index.html`
 *   leading out of `public/` is `forbidden`; one that is not a regular file is `missing`).
 * - A file asked with a trailing slash: `missing`.
 * - A link loop (ELOOP) or a component it may not read (EACCES): `forbidden`. A name that does
 *   not exist, a file used as a folder, a name too long (ENOENT, ENOTDIR, ENAMETOOLONG): `missing`.
 *   Any other file-system error is thrown (the caller answers 500).
 *
 * What it does NOT guarantee (the caller and the deployment do):
 * - The names AS REQUESTED are not checked here: only the real path counts. A segment starting
 *   with a dot (at any level of percent-decoding), a NUL byte or a malformed escape is refused by
 *   `parseAppUiUrl` in `url.ts` (the plugin answers 403 / 400 before calling `resolve`). Here, a
 *   dot-named link whose target is a plain name inside `public/` would be followed.
 * - Hard links are indistinguishable from the file they link: one inside `public/` to a file
 *   elsewhere is served.
 * - Answers are as fresh as the caller keeps them. Positive answers (`file`, `folder`) are
 *   memoised until `forget` is called (the caller calls it on every change the folder watcher
 *   reports, or calls `stopMemoising` when it cannot watch), and only for real paths the caller's
 *   `memoisable` accepts (those where changes are watched); an answer whose check was under way
 *   when `forget` was called is returned but not memoised. The caller opens `realPath` after the
 *   check: a folder on that path swapped for a link in between would be followed by the read.
 */
import type { Stats } from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import { atOrBelow } from '../lib/path-below.js'

export type Resolution =
  /** `size`, `mtimeMs`, `ctimeMs` and `ino` tell one content of `realPath` from the next (see `cacheKey`). */
  | { kind: 'file', realPath: string, size: number, mtimeMs: number, ctimeMs: number, ino: number }
  /** A folder requested without its trailing slash: redirect. */
  | { kind: 'folder', realPath: string }
  | { kind: 'missing' }
  /** A link leading out of public/, or to a dot file inside it. */
  | { kind: 'forbidden' }

function fileAt (realPath: string, stat: Stats): Resolution {
  return { kind: 'file', realPath, size: stat.size, mtimeMs: stat.mtimeMs, ctimeMs: stat.ctimeMs, ino: stat.ino }
}

export interface FolderOptions {
  /** Whether an answer ending at this real path may be memoised (by default, all may). */
  memoisable?: (realPath: string) => boolean
  /** Called for each path checked on disk rather than answered from the memo. */
  onLookup?: () => void
}

/** Bounds the memo of resolved paths (a link cycle inside public/ could make it unbounded). */
const MAX_MEMO = 10_000

/**
 * Maps checked path segments onto one app's `public/` folder. Segments arrive decoded and
 * validated (none empty, none starting with a dot); this adds what only the file system knows:
 * the real path, after every symbolic link, must still be inside `public/` and must not be a dot
 * file. Positive answers are memoised until the next `forget` (none after `stopMemoising`).
 */
export class PublicFolder {
  private readonly memo = new Map<string, Resolution>()
  /** Counts `forget` calls: a check that began before one may describe what is gone. */
  private generation = 0
  private memoising = true

  /** @param root the real path of `public/` ('' for none: every answer is `missing`) */
  private constructor (readonly root: string, private readonly options: FolderOptions) {}

  /** The folder at `publicDir` (its real path); rejects when it is missing or not a folder. */
  static async open (publicDir: string, options: FolderOptions = {}): Promise<PublicFolder> {
    const root = await fs.realpath(publicDir)
    if (!(await fs.stat(root)).isDirectory()) throw new Error('not a folder')
    return new PublicFolder(root, options)
  }

  /** Stands for a `public/` that is gone: nothing is served until it is back. */
  static none (): PublicFolder {
    return new PublicFolder('', {})
  }

  async resolve (segments: readonly string[], trailingSlash: boolean): Promise<Resolution> {
    if (this.root === '') return { kind: 'missing' }
    const key = segments.join('/') + (trailingSlash ? '/' : '')
    const memoised = this.memo.get(key)
    if (memoised !== undefined) return memoised
    const generation = this.generation
    this.options.onLookup?.()
    const resolution = await this.lookup(segments, trailingSlash)
    if (this.memoising && generation === this.generation && (resolution.kind === 'file' || resolution.kind === 'folder') &&
      this.options.memoisable?.(resolution.realPath) !== false) {
      if (this.memo.size >= MAX_MEMO) this.memo.clear()
      this.memo.set(key, resolution)
    }
    return resolution
  }

  /** Drops every memoised answer, and keeps answers being checked now from being memoised. */
  forget (): void {
    this.generation++
    this.memo.clear()
  }

  /** For when changes cannot be watched: from now on every path is checked on disk. */
  stopMemoising (): void {
    this.memoising = false
    this.forget()
  }

  private async lookup (segments: readonly string[], trailingSlash: boolean): Promise<Resolution> {
    const target = await this.real(path.join(this.root, ...segments))
    if (target.kind !== 'ok') return target
    if (target.stat.isDirectory()) {
      if (!trailingSlash) return { kind: 'folder', realPath: target.realPath }
      const index = await this.real(path.join(target.realPath, 'index.html'))
      if (index.kind !== 'ok') return index
      if (!index.stat.isFile()) return { kind: 'missing' }
      return fileAt(index.realPath, index.stat)
    }
    if (!target.stat.isFile() || trailingSlash) return { kind: 'missing' }
    return fileAt(target.realPath, target.stat)
  }

  /** The real path of `candidate` if it is inside the root and not a dot file there, and its stat. */
  private async real (candidate: string): Promise<{ kind: 'ok', realPath: string, stat: Stats } | { kind: 'missing' } | { kind: 'forbidden' }> {
    let realPath: string
    try {
      realPath = await fs.realpath(candidate)
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ENAMETOOLONG') return { kind: 'missing' }
      if (code === 'ELOOP' || code === 'EACCES') return { kind: 'forbidden' }
      throw err
    }
    if (!atOrBelow(realPath, this.root)) return { kind: 'forbidden' }
    const inside = path.relative(this.root, realPath)
    if (inside !== '' && inside.split(path.sep).some((part) => part.startsWith('.'))) return { kind: 'forbidden' }
    try {
      return { kind: 'ok', realPath, stat: await fs.stat(realPath) }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' }
      throw err
    }
  }
}
