import fs from 'node:fs/promises'
import net from 'node:net'

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
 * The claim is a listening socket in Linux's abstract namespace, named after the folder's device
 * and inode. The kernel binds a name once (so two claims racing cannot both win) and frees it the
 * moment its process ends, even by SIGKILL: there is no lock file that a killed process leaves
 * behind and a later start must judge stale, which is where lock files based on a PID race. The
 * socket is close-on-exec, so the servers the holder starts do not inherit the claim. Its one limit:
 * the namespace is per network namespace, so processes in different containers sharing a folder
 * are not told apart.
 */
export async function lockFolder (folder: string): Promise<FolderLock> {
  const { dev, ino } = await fs.stat(folder)
  const name = `\0reaktor-service/folder/${dev}:${ino}`
  // Whoever asks is told the holder's PID, for the message of a start that is turned away.
  const server = net.createServer((socket) => { socket.end(String(process.pid)) })
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen({ path: name }, () => {
        server.off('error', reject)
        resolve()
      })
    })
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err
    throw new FolderInUseError(folder, await holderPid(name))
  }
  // The claim must not keep the process alive by itself.
  server.unref()
  let released: Promise<void> | undefined
  return {
    release: async () => {
      released ??= new Promise((resolve) => server.close(() => resolve()))
      await released
    }
  }
}

/** Asks the holder of `name` for its PID; undefined when it does not answer within a second. */
async function holderPid (name: string): Promise<number | undefined> {
  return await new Promise((resolve) => {
    let answer = ''
    const socket = net.connect({ path: name })
    const done = (): void => {
      clearTimeout(timer)
      socket.destroy()
      const pid = Number(answer.trim())
      resolve(Number.isInteger(pid) && pid > 0 ? pid : undefined)
    }
    const timer = setTimeout(done, 1000)
    socket.on('data', (d: Buffer) => { answer += d.toString() })
    socket.on('end', done)
    socket.on('error', done)
  })
}
