import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import fs from 'node:fs/promises'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import pg from 'pg'
import { DEFAULT_EMBEDDED_POSTGRES_DIR } from '../config.js'
import { isAlive } from '../lib/processes.js'
import { clusterDirFor, postgresUser, reachableBinaries, type Binaries, type PostgresUser } from './embedded-root.js'
import { FolderInUseError, lockFolder, type FolderLock } from './folder-lock.js'

const execFileAsync = promisify(execFile)

export interface EmbeddedPostgres {
  /** Connection string of the service database on the embedded server. */
  url: string
  /** URL of the server's maintenance database (to create test databases). */
  adminUrl: string
  /** Stops the server (fast shutdown: it finishes nothing, but loses nothing committed). */
  stop: () => Promise<void>
}

export interface EmbeddedOptions {
  /** The service's DATA_DIR: the cluster lives in `dataDir/postgres` (as root, perhaps through a link). */
  dataDir: string
  /**
   * As root only (EMBEDDED_POSTGRES_DIR): where the binaries and clusters the `postgres` user
   * cannot reach in place are kept. Default /var/lib/reaktor-service.
   */
  storeDir?: string
  database?: string
  /** Port on 127.0.0.1; default: a free one. A restart on the same port keeps clients' URLs valid. */
  port?: number
  /**
   * Addresses the server listens on besides 127.0.0.1 (IP literals), e.g. the host end of a test's
   * network namespace. Clients on them also need a pg_hba.conf line; the URLs keep 127.0.0.1.
   */
  extraListenAddresses?: readonly string[]
  /** Extra server settings (`-c name=value`), e.g. a small lock table for a test. Names and values: [a-z0-9_.]. */
  serverSettings?: Readonly<Record<string, string | number>>
  log: { info: (obj: object, msg: string) => void, warn: (obj: object, msg: string) => void }
}

/**
 * The PostgreSQL programs, as the user they run as (`postgres` as root) can run them: from the
 * per-platform package embedded-postgres itself picks, or from a copy (see embedded-root.ts).
 */
export async function postgresBinaries (storeDir: string, log: EmbeddedOptions['log']): Promise<{ bin: Binaries, user: PostgresUser | undefined }> {
  const bin = await import(`@embedded-postgres/${os.platform()}-${os.arch()}`) as Binaries
  const user = await postgresUser()
  return { bin: user === undefined ? bin : await reachableBinaries(bin, storeDir, user, log), user }
}

async function commandLine (pid: number): Promise<string> {
  return await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').then((s) => s.replaceAll('\0', ' '), () => '')
}

async function freePort (): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })
}

async function readPassword (file: string): Promise<string> {
  try {
    return (await fs.readFile(file, 'utf8')).trim()
  } catch {
    const password = randomBytes(24).toString('base64url')
    await fs.writeFile(file, password + '\n', { mode: 0o600 })
    return password
  }
}

/**
 * Starts the embedded PostgreSQL of DATA_DIR: initialises it on first run, and recovers from a
 * previous run that was killed (`kill -9`) and left its server running or a stale lock file behind.
 * DATA_DIR belongs to one caller at a time, from this call until `stop()` (or the end of the
 * process): a second start on it fails at once and touches nothing.
 */
export async function startEmbeddedPostgres (options: EmbeddedOptions): Promise<EmbeddedPostgres> {
  const { dataDir } = options
  await fs.mkdir(dataDir, { recursive: true })
  const locks: FolderLock[] = []
  const releaseLocks = async (): Promise<void> => { for (const lock of locks.splice(0).reverse()) await lock.release() }
  try {
    locks.push(await claim(dataDir, dataDir))
    return await startClaimed(options, locks, releaseLocks)
  } catch (err) {
    await releaseLocks()
    throw err
  }
}

async function claim (folder: string, dataDir: string): Promise<FolderLock> {
  try {
    return await lockFolder(folder)
  } catch (err) {
    if (!(err instanceof FolderInUseError)) throw err
    throw new Error(`the embedded PostgreSQL of DATA_DIR ${dataDir} is in use by another reaktor-service process` +
      `${err.holderPid === undefined ? '' : ` (pid ${err.holderPid})`}; stop that process, or give this one its own DATA_DIR or a DATABASE_URL`, { cause: err })
  }
}

async function startClaimed (options: EmbeddedOptions, locks: FolderLock[], releaseLocks: () => Promise<void>): Promise<EmbeddedPostgres> {
  const { dataDir, log } = options
  const database = options.database ?? 'reaktor'
  const store = options.storeDir ?? DEFAULT_EMBEDDED_POSTGRES_DIR
  const { bin, user } = await postgresBinaries(store, log)
  let clusterDir = await clusterDirFor(dataDir, store, user)
  // A cluster in the store has a folder of its own there: claimed too, so that two DATA_DIRs
  // linking to one cluster (a copied DATA_DIR) cannot both run it.
  if (await fs.realpath(path.dirname(clusterDir)) !== await fs.realpath(dataDir)) locks.push(await claim(path.dirname(clusterDir), dataDir))
  const run = async (file: string, args: string[]): Promise<void> => {
    await execFileAsync(file, args, { ...user, env: { ...process.env, LC_MESSAGES: 'C' }, timeout: 120_000 })
  }
  const password = await readPassword(path.join(dataDir, 'postgres-password'))

  if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) {
    // A folder without PG_VERSION is an initdb that never finished: start it over.
    await fs.rm(clusterDir, { recursive: true, force: true })
    await fs.mkdir(clusterDir, { recursive: true, mode: 0o700 })
    if (user !== undefined) await fs.chown(clusterDir, user.uid, user.gid)
    // Readable by initdb only: 0600, owned by the user initdb runs as, beside the cluster folder.
    const pwfile = path.join(path.dirname(clusterDir), `.initdb-pw-${randomBytes(6).toString('hex')}`)
    await fs.writeFile(pwfile, password + '\n', { mode: 0o600 })
    if (user !== undefined) await fs.chown(pwfile, user.uid, user.gid)
    try {
      log.info({ clusterDir }, 'initialising embedded PostgreSQL (first run)')
      await run(bin.initdb, [`--pgdata=${clusterDir}`, '--auth=scram-sha-256', '--username=postgres',
        `--pwfile=${pwfile}`, '--encoding=UTF8', '--locale=C'])
    } finally {
      await fs.rm(pwfile, { force: true })
    }
  }
  // One name for the folder in every command line and check, however DATA_DIR was spelt.
  clusterDir = await fs.realpath(clusterDir)
  // Written by earlier versions, which decided ownership by it; the lock decides now.
  await fs.rm(path.join(dataDir, 'postgres.owner'), { force: true })

  const pgCtl = async (args: string[]): Promise<void> => { await run(bin.pg_ctl, args) }
  const stopServer = async (): Promise<void> => { await pgCtl(['stop', '-D', clusterDir, '-m', 'fast', '-w', '-t', '60']) }
  await recoverFromPreviousRun(clusterDir, log, pgCtl)

  const port = options.port ?? await freePort()
  const logFile = path.join(clusterDir, 'server.log')
  const settings = Object.entries(options.serverSettings ?? {}).map(([name, value]) => {
    if (!/^[a-z0-9_.]+$/i.test(name) || !/^[a-z0-9_.]+$/i.test(String(value))) throw new Error(`embedded PostgreSQL: bad server setting ${name}=${String(value)}`)
    return ` -c ${name}=${String(value)}`
  }).join('')
  const extra = options.extraListenAddresses ?? []
  const bad = extra.find((address) => net.isIP(address) === 0)
  if (bad !== undefined) throw new Error(`embedded PostgreSQL: not an IP address: ${bad}`)
  const listen = ['127.0.0.1', ...extra].join(',')
  await pgCtl(['start', '-D', clusterDir, '-w', '-t', '60', '-l', logFile, '-o',
    `-p ${port} -c listen_addresses=${listen} -c unix_socket_directories=''${settings}`]).catch(async (err) => {
    const tail = await fs.readFile(logFile, 'utf8').then((s) => s.trim().split('\n').slice(-5).join(' | '), () => '')
    throw new Error(`embedded PostgreSQL in ${clusterDir} did not start: ${tail || (err as Error).message}`)
  })
  const started = await postmasterPid(clusterDir)

  const adminUrl = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`
  const client = new pg.Client({ connectionString: adminUrl })
  try {
    await client.connect()
    const exists = await client.query('select 1 from pg_database where datname = $1', [database])
    if (exists.rowCount === 0) await client.query(`create database ${client.escapeIdentifier(database)}`)
  } catch (err) {
    await stopServer().catch(() => {})
    throw err
  } finally {
    await client.end().catch(() => {})
  }

  let stopped: Promise<void> | undefined
  return {
    url: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(database)}`,
    adminUrl,
    stop: async () => {
      stopped ??= (async () => {
        try {
          // Only the server this call started: one that has replaced it is someone else's.
          const running = await postmasterPid(clusterDir)
          if (running === started) await stopServer()
          else if (running !== undefined) log.warn({ clusterDir, started, running }, 'not stopping the PostgreSQL in the cluster folder: it is not the server this process started')
        } finally {
          await releaseLocks()
        }
      })()
      await stopped
    }
  }
}

/** The PID in the cluster's `postmaster.pid`, if there is one. */
export async function postmasterPid (clusterDir: string): Promise<number | undefined> {
  const pid = Number((await fs.readFile(path.join(clusterDir, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n')[0])
  return Number.isInteger(pid) && pid > 0 ? pid : undefined
}

/**
 * A previous run killed with SIGKILL leaves its PostgreSQL running (pg_ctl detaches it) or a stale
 * `postmaster.pid`. The caller holds DATA_DIR's lock, which a live service would still hold: a
 * server running in the folder now is an orphan, and is shut down cleanly before we start our own.
 */
async function recoverFromPreviousRun (clusterDir: string, log: EmbeddedOptions['log'], pgCtl: (args: string[]) => Promise<void>): Promise<void> {
  const pid = await postmasterPid(clusterDir)
  if (pid === undefined) return
  const server = await serverIn(pid, clusterDir)
  if (server === 'foreign') {
    throw new Error(`embedded PostgreSQL: a PostgreSQL server this service did not start (pid ${pid}) runs in ${clusterDir}; ` +
      'stop it, or give this service a DATA_DIR of its own')
  }
  if (server === 'none') {
    const pidFile = path.join(clusterDir, 'postmaster.pid')
    log.warn({ pidFile }, 'removing stale PostgreSQL lock file left by a previous run')
    await fs.rm(pidFile, { force: true })
    return
  }
  log.warn({ postmasterPid: pid }, 'stopping the embedded PostgreSQL orphaned by a previous run that was killed')
  try {
    await pgCtl(['stop', '-D', clusterDir, '-m', 'fast', '-w', '-t', '30'])
  } catch {
    await pgCtl(['stop', '-D', clusterDir, '-m', 'immediate', '-w', '-t', '30'])
  }
}

/** What every server this service starts has on its command line (startClaimed's pg_ctl start sets it). */
const OWN_SERVER_MARK = ' -c unix_socket_directories= '

/**
 * Whether `pid` is a PostgreSQL serving this very cluster folder, and whether this service started
 * it: after a reboot the PID in a stale lock file may belong to anything, even another PostgreSQL.
 * The server works in its data folder, so its working directory names the folder whatever path it
 * was started with. A server started otherwise (DATA_DIR/postgres linked to someone's cluster) is
 * no orphan of ours: neither stopped nor its lock file removed.
 */
async function serverIn (pid: number, clusterDir: string): Promise<'ours' | 'foreign' | 'none'> {
  const command = isAlive(pid) ? await commandLine(pid) : ''
  if (!command.includes('postgres')) return 'none'
  const cwd = await fs.realpath(`/proc/${pid}/cwd`).catch(() => undefined)
  if (cwd !== clusterDir && !command.includes(`postgres -D ${clusterDir} `)) return 'none'
  return command.includes(OWN_SERVER_MARK) ? 'ours' : 'foreign'
}
