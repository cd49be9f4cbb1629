import { createWriteStream, type WriteStream } from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import { PassThrough } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type { ReadEntry } from 'tar'

/** What an unpack does with each checked entry; inspecting has none. */
export interface Sink {
  file: (rel: string, entry: ReadEntry, mode: number) => void
  dir: (rel: string) => void
  /** Set by the reading: stops it with a problem the sink met (a full disk). */
  stop?: (err: unknown) => void
}

/** What is left to write once every file is: links, and the folders' modes. */
export interface PackageLayout {
  /** Every path with its kind: folders ('dir') end 0755 whatever the umask. */
  kinds: ReadonlyMap<string, string>
  symlinks: ReadonlyMap<string, string>
  hardLinks: ReadonlyArray<{ rel: string, target: string }>
}

/**
 * Writes the checked entries under `dest`, which it made: files opened with O_EXCL (never over
 * anything, never through a link), folders as entries need them. Links wait for the end, when
 * every one has been followed through all the others.
 */
export class DiskWriter implements Sink {
  stop?: (err: unknown) => void
  private aborted = false
  private failure: unknown
  private readonly tasks = new Set<Promise<void>>()
  private readonly open = new Set<WriteStream>()

  constructor (private readonly dest: string) {}

  at (rel: string): string {
    const full = path.join(this.dest, rel)
    // packagePath already made sure; a second look costs nothing.
    if (full !== this.dest && !full.startsWith(this.dest + path.sep)) throw new Error(`refused to write ${full} outside ${this.dest}`)
    return full
  }

  dir (rel: string): void {
    this.track(fs.mkdir(this.at(rel), { recursive: true }).then(() => undefined))
  }

  file (rel: string, entry: ReadEntry, mode: number): void {
    // Piped at once (a listener added after the folder is made would miss the start): what
    // comes before the file is open waits in `pending`, which holds the reading back when full.
    const pending = new PassThrough()
    pending.on('error', () => {})
    entry.pipe(pending)
    this.track(this.write(this.at(rel), pending, mode))
  }

  private async write (full: string, pending: PassThrough, mode: number): Promise<void> {
    try {
      await fs.mkdir(path.dirname(full), { recursive: true })
      if (this.aborted) return
      const out = createWriteStream(full, { flags: 'wx', mode })
      this.open.add(out)
      try {
        await pipeline(pending, out)
      } finally {
        this.open.delete(out)
      }
      await fs.chmod(full, mode)
    } finally {
      // What is left is drained, or the reading would wait for it for ever.
      pending.resume()
    }
  }

  private track (task: Promise<void>): void {
    const tracked = task.catch((err: unknown) => {
      if (this.aborted) return
      this.failure ??= err
      this.stop?.(err)
    })
    this.tasks.add(tracked)
    void tracked.finally(() => this.tasks.delete(tracked))
  }

  /** Waits for every write; the first that failed (a full disk) is thrown. */
  async settle (): Promise<void> {
    while (this.tasks.size > 0) await Promise.all([...this.tasks])
    if (this.failure !== undefined) throw this.failure
  }

  /** Stops the writes in progress (the reading has failed) and waits for them to end. */
  async abort (): Promise<void> {
    this.aborted = true
    for (const out of this.open) out.destroy()
    while (this.tasks.size > 0) await Promise.all([...this.tasks])
  }

  async links (layout: PackageLayout): Promise<void> {
    for (const [rel, target] of layout.symlinks) {
      const full = this.at(rel)
      await fs.mkdir(path.dirname(full), { recursive: true })
      await fs.symlink(target, full)
    }
    for (const { rel, target } of layout.hardLinks) {
      const full = this.at(rel)
      await fs.mkdir(path.dirname(full), { recursive: true })
      await fs.link(this.at(target), full)
    }
  }

  /** Folders 0755 whatever the umask made them (files got their modes as they were written). */
  async folderModes (layout: PackageLayout): Promise<void> {
    await fs.chmod(this.dest, 0o755)
    for (const [rel, kind] of layout.kinds) if (kind === 'dir' && rel !== '') await fs.chmod(this.at(rel), 0o755)
  }
}

