import { atOrBelow } from './path-below.js'
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
  /** The keys of each path, entries and loads alike. */
  private readonly byPath = new Map<string, Set<string>>()
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
    this.track(key)
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
    const keys = this.byPath.get(file)
    if (keys === undefined) return
    for (const key of keys) this.drop(key)
  }

  /** As `invalidateFile`, for every file at or below any of `folders` (one pass over the paths). */
  invalidateBelow (folders: Iterable<string>): void {
    const list = [...folders]
    if (list.length === 0) return
    for (const [file, keys] of this.byPath) {
      if (list.some((folder) => atOrBelow(file, folder))) for (const key of keys) this.drop(key)
    }
  }

  private track (key: string): void {
    const file = pathOf(key)
    const keys = this.byPath.get(file)
    if (keys === undefined) this.byPath.set(file, new Set([key]))
    else keys.add(key)
  }

  /** Called once a key is in neither map. */
  private untrack (key: string): void {
    if (this.entries.has(key) || this.loading.has(key)) return
    const file = pathOf(key)
    const keys = this.byPath.get(file)
    if (keys === undefined) return
    keys.delete(key)
    if (keys.size === 0) this.byPath.delete(file)
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

  private insert (key: string, entry: CachedFile): void {
    if (!this.holds(entry.bytes)) return
    const replaced = this.entries.get(key)
    if (replaced !== undefined) {
      this.entries.delete(key)
      this.total -= replaced.bytes
    }
    this.entries.set(key, entry)
    this.track(key)
    this.total += entry.bytes
    for (const [oldest, old] of this.entries) {
      if (this.total <= this.maxBytes) break
      this.entries.delete(oldest)
      this.total -= old.bytes
      this.untrack(oldest)
    }
  }
}
