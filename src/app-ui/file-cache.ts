import type { CachedFile } from './prepared-file.js'

/**
 * An LRU of prepared files, bounded by the memory of all their variants. Keys are chosen by the
 * caller (the app-UI plugin: a real path and the size, mtime and inode it was read at). Files may
 * change while the service runs: `invalidate` drops the entries a change affects, and a load that
 * was in flight when they were invalidated is handed to whoever waits on it but never kept, since
 * it may hold what was on disk before the change.
 * Concurrent first requests for one key share one read.
 */
export class FileCache {
  private readonly entries = new Map<string, CachedFile>()
  private readonly loading = new Map<string, Promise<CachedFile>>()
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
    try {
      const entry = await promise
      // Still ours only if no invalidation (nor a load started after one) took the key meanwhile.
      if (this.loading.get(key) === promise) this.insert(key, entry)
      return entry
    } finally {
      if (this.loading.get(key) === promise) this.loading.delete(key)
    }
  }

  /**
   * Forgets every entry whose key passes `affected`, and every load of such a key in flight: the
   * next request for it reads again, and the load already running is not kept when it ends.
   */
  invalidate (affected: (key: string) => boolean): void {
    for (const [key, entry] of this.entries) {
      if (!affected(key)) continue
      this.entries.delete(key)
      this.total -= entry.bytes
    }
    for (const key of this.loading.keys()) {
      if (affected(key)) this.loading.delete(key)
    }
  }

  private insert (key: string, entry: CachedFile): void {
    if (!this.holds(entry.bytes)) return
    const replaced = this.entries.get(key)
    if (replaced !== undefined) {
      this.entries.delete(key)
      this.total -= replaced.bytes
    }
    this.entries.set(key, entry)
    this.total += entry.bytes
    for (const [oldest, old] of this.entries) {
      if (this.total <= this.maxBytes) break
      this.entries.delete(oldest)
      this.total -= old.bytes
    }
  }
}
