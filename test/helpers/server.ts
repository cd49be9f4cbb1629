import { execFile, spawn, type ChildProcess } from 'node:child_process'
import net from 'node:net'
import path from 'node:path'
import { promisify } from 'node:util'
import { DEFAULT_EMBEDDED_POSTGRES_DIR } from '../../src/config.js'
import { postgresBinaries, postmasterPid } from '../../src/db/embedded.js'
import { deadline, waitFor } from './timing.js'
import { silentLogger } from './log.js'
import { ROOT } from './paths.js'

const execFileAsync = promisify(execFile)

/** One real `src/server.ts` process, its output (stdout and stderr) and its exit code. */
export interface ServerProcess { child: ChildProcess, output: () => string, exited: Promise<number | null> }

/**
 * Spawns the service from `cwd` (default: this checkout), on the embedded database and with no apps
 * unless `env` says otherwise. `prefix` runs it through another command (`ip netns exec NAME`).
 */
export function startServer (env: Record<string, string>, cwd = ROOT, prefix: readonly string[] = []): ServerProcess {
  let output = ''
  const [file, ...args] = [...prefix, process.execPath, '--import', 'tsx', 'src/server.ts']
  const child = spawn(file, args, {
    cwd,
    env: { ...process.env, DATABASE_URL: '', PORT: '0', LOG_LEVEL: 'info', REAKTOR_APPS_DIR: path.join(ROOT, 'test', 'no-such-apps'), CONSOLE: 'false', ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  child.stdout?.on('data', (d: Buffer) => { output += d.toString() })
  child.stderr?.on('data', (d: Buffer) => { output += d.toString() })
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  return { child, output: () => output, exited }
}

const LISTENING = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/

/** The server's URL once it listens; throws when it exits first. `name` is its name in messages. */
export async function listeningUrl (server: ServerProcess, name = 'the server'): Promise<string> {
  const match = await waitFor(() => {
    if (server.child.exitCode !== null) throw new Error(`${name} exited: ${server.output()}`)
    return LISTENING.exec(server.output())
  }, { timeoutMs: deadline(60_000), what: `${name} to listen` })
  return match[1]
}

/** How a start ended: listening (with its URL) or exited (with its code), whichever came first. */
export async function startOutcome (server: ServerProcess): Promise<{ url: string } | { code: number | null }> {
  return await waitFor(() => {
    const match = LISTENING.exec(server.output())
    if (match !== null) return { url: match[1] }
    return server.child.exitCode !== null ? { code: server.child.exitCode } : undefined
  }, { timeoutMs: deadline(60_000), what: 'the server to listen or exit' })
}

/** Whether a process of that PID runs. */
export function alive (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** A port free on 127.0.0.1 a moment ago, for a process that must keep its port across restarts. */
export async function freePort (): Promise<number> {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as net.AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

/**
 * Stops a PostgreSQL left running in `clusterDir` (a service killed with SIGKILL leaves its server
 * running), as the user it runs as; nothing when none runs there.
 */
export async function stopLeftoverPostgres (clusterDir: string): Promise<void> {
  if (await postmasterPid(clusterDir) === undefined) return
  const { bin, user } = await postgresBinaries(DEFAULT_EMBEDDED_POSTGRES_DIR, silentLogger)
  await execFileAsync(bin.pg_ctl, ['stop', '-D', clusterDir, '-m', 'immediate', '-w'], { ...user }).catch(() => {})
}
