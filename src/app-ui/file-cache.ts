import path from 'node:path'
import type { CachedFile } from './prepared-file.js'

/** The file a key is for: keys are `<path>\0<anything>` (a key without a NUL is a path alone). */
function pathOf (key: string): string {
  const end = key.indexOf('\0')
  return end === -1 ? key : key.slice(0, end)
}

/**
 * An LRU of prepared files, bounded by the memory of all their variants. Keys are chosen by the
 * caller: a path, a NUL, and whatever tells one content of it from the next (the app-UI plugin:
 * the real path and the size, times and inode it was read at). Files may change while the service
 * runs: `invalidateFile` and `invalidateBelow` drop the entries a change affects, and a load that
 * was in flight when they were invalidated is handed to whoever waits on it but never kept, since
 * it may hold what was on disk before the change. Keys are indexed by path: dropping one file's
 * entries costs the same however many files are cached, which matters when a build writes
 * thousands of files while other apps fill the cache.
 * Concurrent first requests for one key share one read.
 */
export class FileCache {
  private readonly entries = new Map<string, CachedFile>()
  private readonly loading = new Map<string, Promise<CachedFile>>()
  /** The keys of each path, entries and loads alike, by path component: a subtree is one branch. */
  private readonly byPath = new PathTree()
  private total = 0

  constructor (readonly maxBytes: number) {}

  /** Whether an entry of this many bytes can be kept (an entry larger than the whole cache never is). */
  holds (bytes: number): boolean {
    return bytes <= this.maxBytes
  }

  get bytes (): number {
    return this.total
  }

  get size (): number {
    return this.entries.size
  }

  /** The entry if it is in memory now, without loading it or changing its LRU position. */
  peek (key: string): CachedFile | undefined {
    return this.entries.get(key)
  }

  async get (key: string, load: () => Promise<CachedFile>): Promise<CachedFile> {
    const hit = this.entries.get(key)
    if (hit !== undefined) {
      // Map order is insertion order: re-inserting marks it most recently used.
      this.entries.delete(key)
      this.entries.set(key, hit)
      return hit
    }
    const pending = this.loading.get(key)
    if (pending !== undefined) return await pending
    const promise = load()
    this.loading.set(key, promise)
    this.byPath.add(pathOf(key), key)
    try {
      const entry = await promise
      // Still ours only if no invalidation (nor a load started after one) took the key meanwhile.
      if (this.loading.get(key) === promise) this.insert(key, entry)
      return entry
    } finally {
      if (this.loading.get(key) === promise) {
        this.loading.delete(key)
        this.untrack(key)
      }
    }
  }

  /**
   * Forgets every entry of `file`, and every load of it in flight: the next request for it reads
   * again, and the load already running is not kept when it ends.
   */
  invalidateFile (file: string): void {
    for (const key of this.byPath.keysAt(file)) this.drop(key)
  }

  /** As `invalidateFile`, for every file at or below any of `folders` (a cost of what is below them). */
  invalidateBelow (folders: Iterable<string>): void {
    for (const folder of folders) {
      for (const key of this.byPath.keysBelow(folder)) this.drop(key)
    }
  }

  /** Called once a key is in neither map. */
  private untrack (key: string): void {
    if (this.entries.has(key) || this.loading.has(key)) return
    this.byPath.remove(pathOf(key), key)
  }

  private drop (key: string): void {
    const entry = this.entries.get(key)
    if (entry !== undefined) {
      this.entries.delete(key)
      this.total -= entry.bytes
    }
    this.loading.delete(key)
    this.untrack(key)
  }

  /**
   * Called only by the load that holds `key` in `loading`: so no entry has the key yet (a load is
   * started only for a key not in memory, and no other can start while this one holds it), and
   * the key is already filed under its path.
   */
  private insert (key: string, entry: CachedFile): void {
    if (!this.holds(entry.bytes)) return
    this.entries.set(key, entry)
    this.total += entry.bytes
    for (const [oldest, old] of this.entries) {
      if (this.total <= this.maxBytes) break
      this.entries.delete(oldest)
      this.total -= old.bytes
      this.untrack(oldest)
    }
  }
}

interface PathNode { children: Map<string, PathNode>, keys: Set<string> }

/** Keys filed under the components of their path. */
class PathTree {
  private readonly root: PathNode = { children: new Map(), keys: new Set() }

  add (file: string, key: string): void {
    let node = this.root
    for (const part of file.split(path.sep)) {
      let child = node.children.get(part)
      if (child === undefined) {
        child = { children: new Map(), keys: new Set() }
        node.children.set(part, child)
      }
      node = child
    }
    node.keys.add(key)
  }

  remove (file: string, key: string): void {
    const trail: Array<[PathNode, string]> = []
    let node = this.root
    for (const part of file.split(path.sep)) {
      const child = node.children.get(part)
      if (child === undefined) return
      trail.push([node, part])
      node = child
    }
    node.keys.delete(key)
    // Branches left empty go, so that the tree holds only what is cached.
    for (let i = trail.length - 1; i >= 0; i--) {
      const [parent, part] = trail[i]
      const child = parent.children.get(part) as PathNode
      if (child.keys.size > 0 || child.children.size > 0) break
      parent.children.delete(part)
    }
  }

  /** The keys of `file` itself (a copy: the caller may remove them meanwhile). */
  keysAt (file: string): string[] {
    const node = this.find(file)
    return node === undefined ? [] : [...node.keys]
  }

  /** The keys of `folder` and of everything below it (a copy). */
  keysBelow (folder: string): string[] {
    const node = this.find(folder)
    const keys: string[] = []
    const visit = (n: PathNode): void => {
      keys.push(...n.keys)
      for (const child of n.children.values()) visit(child)
    }
    if (node !== undefined) visit(node)
    return keys
  }

  private find (file: string): PathNode | undefined {
    let node: PathNode | undefined = this.root
    for (const part of file.split(path.sep)) {
      node = node.children.get(part)
      if (node === undefined) return undefined
    }
    return node
  }
}
