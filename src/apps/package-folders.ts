import { createHash, randomUUID } from 'node:crypto'
import fs from 'node:fs/promises'
import path from 'node:path'
import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import { unpackPackage, type InspectedPackage, type PackageLimits } from './package-archive.js'
import { packageSha, readPackage } from './package-store.js'

async function exists (p: string): Promise<boolean> {
  return await fs.stat(p).then(() => true, () => false)
}

/**
 * The published packages unpacked on this node, under `DATA_DIR/apps/`: one folder per stored
 * version, named by its name, version and the start of its sha256, so that a folder is only ever
 * the one content (a version deleted and published again with other bytes gets another folder, and
 * Node's module cache, which never forgets a file, cannot serve the old code for it). A folder is
 * unpacked beside its place and renamed into it once complete: one that exists is whole. Nodes
 * share no disk: each fetches what it lacks from the database and checks the sha256 first.
 */
export class PackageFolders {
  private readonly pending = new Map<string, Promise<string | undefined>>()

  constructor (readonly root: string, private readonly db: Kysely<Database>, private readonly limits: PackageLimits) {}

  /** Where the version of these bytes lives here. */
  folderOf (name: string, version: string, sha256: string): string {
    return path.join(this.root, `${name.replace('/', '+')}@${version}-${sha256.slice(0, 16)}`)
  }

  /**
   * The folder of a stored version, fetched and unpacked here unless it already is; undefined when
   * no such version is stored. Concurrent callers share one fetch.
   */
  async ensure (name: string, version: string): Promise<string | undefined> {
    const key = `${name}@${version}`
    let fetching = this.pending.get(key)
    if (fetching === undefined) {
      fetching = this.fetch(name, version).finally(() => this.pending.delete(key))
      this.pending.set(key, fetching)
    }
    return await fetching
  }

  /**
   * Checks and unpacks a package in one reading of the archive (unpackPackage refuses what
   * inspectPackage refuses), then moves it to the folder of its name, version and sha256.
   * `created`: this call made that folder (false: the same bytes were unpacked there already).
   */
  async unpack (bytes: Buffer): Promise<{ pkg: InspectedPackage, dir: string, created: boolean }> {
    await fs.mkdir(this.root, { recursive: true })
    const staging = path.join(this.root, `.unpacking-${randomUUID()}`)
    let pkg: InspectedPackage
    try {
      pkg = await unpackPackage(bytes, staging, this.limits)
    } catch (err) {
      await fs.rm(staging, { recursive: true, force: true })
      throw err
    }
    const dir = this.folderOf(pkg.name, pkg.version, pkg.sha256)
    try {
      await fs.rename(staging, dir)
      return { pkg, dir, created: true }
    } catch (err) {
      await fs.rm(staging, { recursive: true, force: true })
      // There already (a folder is only renamed into place whole).
      if (await exists(dir)) return { pkg, dir, created: false }
      throw err
    }
  }

  /** Removes the folders of a version (undefined: of every version of the app). */
  async remove (name: string, version?: string): Promise<void> {
    const prefix = `${name.replace('/', '+')}@${version === undefined ? '' : `${version}-`}`
    const ours = (e: string): boolean => version === undefined ? /^[0-9A-Za-z][0-9A-Za-z.+_-]*-[0-9a-f]{16}$/.test(e.slice(prefix.length)) : e.length === prefix.length + 16
    const entries = await fs.readdir(this.root).catch(() => [])
    await Promise.all(entries.filter((e) => e.startsWith(prefix) && ours(e))
      .map(async (e) => { await fs.rm(path.join(this.root, e), { recursive: true, force: true }) }))
  }

  private async fetch (name: string, version: string): Promise<string | undefined> {
    const sha256 = await packageSha(this.db, name, version)
    if (sha256 === undefined) return undefined
    const dir = this.folderOf(name, version, sha256)
    if (await exists(dir)) return dir
    const stored = await readPackage(this.db, name, version)
    if (stored === undefined) return undefined
    const actual = createHash('sha256').update(stored.bytes).digest('hex')
    if (actual !== stored.sha256) {
      throw new Error(`app ${name}@${version}: the stored package has sha256 ${actual}, not the recorded ${stored.sha256}; it is not used`)
    }
    return (await this.unpack(stored.bytes)).dir
  }
}
