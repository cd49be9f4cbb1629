/**
 * A PostgreSQL server of a test's own, for faults that would disturb the other test files on the
 * run's shared server (a restart, a freeze). Stopped and its folder removed at teardown.
 */
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { postmasterPid as postmasterPidIn, startEmbeddedPostgres, type EmbeddedOptions, type EmbeddedPostgres } from '../../src/db/embedded.js'
import type { TestContext } from './test-context.js'
import { silentLogger } from './log.js'

export interface OwnPostgres extends EmbeddedPostgres {
  dataDir: string
  /** The postmaster's pid (from postmaster.pid). */
  postmasterPid: () => Promise<number>
}

export async function ownPostgres (t: TestContext, options: Partial<EmbeddedOptions> = {}): Promise<OwnPostgres> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'reaktor-own-pg-'))
  // As root the embedded server runs as `postgres`, which must be able to enter the folder.
  await fs.chmod(dataDir, 0o755)
  t.teardown(async () => await fs.rm(dataDir, { recursive: true, force: true }))
  const server = await startEmbeddedPostgres({ dataDir, log: silentLogger, ...options })
  t.teardown(async () => await server.stop().catch(() => {}))
  const postmasterPid = async (): Promise<number> => {
    const pid = await postmasterPidIn(path.join(dataDir, 'postgres'))
    if (pid === undefined) throw new Error(`no postmaster.pid in ${dataDir}/postgres`)
    return pid
  }
  return { ...server, dataDir, postmasterPid }
}

/** The pids of a process's children (a postmaster's backends and helpers), from /proc. */
export async function childPids (pid: number): Promise<number[]> {
  const children: number[] = []
  for (const entry of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    const stat = await fs.readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '')
    // The command may hold spaces and parentheses: the fields after its closing ')' are fixed.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
    if (ppid === pid) children.push(Number(entry))
  }
  return children
}

/**
 * Freezes the whole server (`kill -STOP` on the postmaster first, so that it forks nothing more,
 * then on every backend): sockets stay open and the kernel still accepts connections, but nothing
 * answers. Returns the thaw, which is idempotent; the caller registers it as a teardown too.
 */
export async function freeze (server: OwnPostgres): Promise<() => void> {
  const postmaster = await server.postmasterPid()
  process.kill(postmaster, 'SIGSTOP')
  const children = await childPids(postmaster)
  for (const pid of children) process.kill(pid, 'SIGSTOP')
  let thawed = false
  return () => {
    if (thawed) return
    thawed = true
    for (const pid of children) {
      try { process.kill(pid, 'SIGCONT') } catch { /* gone */ }
    }
    process.kill(postmaster, 'SIGCONT')
  }
}
