import type { CachedFile } from './prepared-file.js'

/**
 * An LRU of prepared files, bounded by the memory of all their variants. Keyed by real path: the
 * content of a version path never changes while the service runs, so an entry never goes stale.
 * Concurrent first requests for one file share one read.
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
      this.insert(key, entry)
      return entry
    } finally {
      this.loading.delete(key)
    }
  }

  private insert (key: string, entry: CachedFile): void {
    if (!this.holds(entry.bytes)) return
    this.entries.set(key, entry)
    this.total += entry.bytes
    for (const [oldest, old] of this.entries) {
      if (this.total <= this.maxBytes) break
      this.entries.delete(oldest)
      this.total -= old.bytes
    }
  }
}
