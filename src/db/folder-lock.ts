import { createHash } from 'node:crypto'
import fs from 'node:fs/promises'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'

/** An exclusive claim on a folder, held until `release()` or the end of the process. */
export interface FolderLock {
  release: () => Promise<void>
}

export class FolderInUseError extends Error {
  readonly code = 'REAKTOR_FOLDER_IN_USE'
  constructor (public readonly folder: string, public readonly holderPid: number | undefined) {
    super(`${folder} is in use by another process${holderPid === undefined ? '' : ` (pid ${holderPid})`}`)
    this.name = 'FolderInUseError'
  }
}

/**
 * Claims `folder` for this process, or throws FolderInUseError when another holder has it.
 *
 * On Linux the claim is a listening socket in the abstract namespace, named after the folder's
 * device and inode. The kernel binds a name once (so two claims racing cannot both win) and frees it
 * the moment its process ends, even by SIGKILL: there is no lock file that a killed process leaves
 * behind and a later start must judge stale, which is where lock files based on a PID race. The
 * socket is close-on-exec, so the servers the holder starts do not inherit the claim. Its one limit:
 * the namespace is per network namespace, so processes in different containers sharing a folder
 * are not told apart.
 *
 * Other systems have no abstract namespace: there the claim is a socket file in the temporary
 * folder, named the same way. A killed holder leaves that file behind; a claim that finds it
 * refusing connections removes it and binds once more. Two starts recovering the same stale file at
 * the same moment could then both win: the one race left, after a kill -9, on those systems only.
 */
export async function lockFolder (folder: string, options: { abstract?: boolean } = {}): Promise<FolderLock> {
  const abstract = options.abstract ?? process.platform === 'linux'
  const name = claimName(await fs.stat(folder), abstract)
  // Whoever asks is told the holder's PID, for the message of a start that is turned away.
  const server = net.createServer((socket) => { socket.end(String(process.pid)) })
  const listen = async (): Promise<void> => {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen({ path: name }, () => {
        server.off('error', reject)
        resolve()
      })
    })
  }
  try {
    await listen()
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err
    const holder = await askHolder(name)
    if (abstract || !holder.stale) throw new FolderInUseError(folder, holder.pid)
    await fs.rm(name, { force: true })
    await listen().catch((again: NodeJS.ErrnoException) => {
      throw again.code === 'EADDRINUSE' ? new FolderInUseError(folder, undefined) : again
    })
  }
  // The claim must not keep the process alive by itself.
  server.unref()
  let released: Promise<void> | undefined
  return {
    release: async () => {
      // Closing also removes a socket file (libuv unlinks what it bound).
      released ??= new Promise((resolve) => server.close(() => resolve()))
      await released
    }
  }
}

/** The socket name that claims the folder with this device and inode. */
export function claimName ({ dev, ino }: { dev: number, ino: number }, abstract: boolean): string {
  if (abstract) return `\0reaktor-service/folder/${dev}:${ino}`
  // Socket paths are short (104 bytes on macOS): a digest, not the folder's path.
  const digest = createHash('sha256').update(`${dev}:${ino}`).digest('hex').slice(0, 16)
  return path.join(os.tmpdir(), `reaktor-service-${digest}.sock`)
}

/**
 * Asks the holder of `name` for its PID. `stale`: nobody listens there (a socket file left by a
 * killed holder); a holder that does not answer within a second is alive, its PID unknown.
 */
async function askHolder (name: string): Promise<{ pid?: number, stale: boolean }> {
  return await new Promise((resolve) => {
    let answer = ''
    let refused = false
    const socket = net.connect({ path: name })
    const done = (): void => {
      clearTimeout(timer)
      socket.destroy()
      const pid = Number(answer.trim())
      resolve({ pid: Number.isInteger(pid) && pid > 0 ? pid : undefined, stale: refused })
    }
    const timer = setTimeout(done, 1000)
    socket.on('data', (d: Buffer) => { answer += d.toString() })
    socket.on('end', done)
    socket.on('error', (err: NodeJS.ErrnoException) => {
      refused = err.code === 'ECONNREFUSED' || err.code === 'ENOENT'
      done()
    })
  })
}
