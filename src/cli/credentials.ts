import { randomBytes } from 'node:crypto'
import type { Stats } from 'node:fs'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { CliError, EXIT } from './context.js'

/** What `reaktor login` keeps: the API token it created, and where it works. */
export interface StoredLogin {
  url: string
  username: string
  token: string
  tokenId: string
}

/**
 * `$XDG_CONFIG_HOME/reaktor/credentials.json`, or `~/.config/reaktor/credentials.json`. A relative
 * XDG_CONFIG_HOME is ignored, as the XDG spec asks: it would put the token under whatever folder
 * the command runs in (a repository, to be committed with it).
 */
export function credentialsPath (env: Record<string, string | undefined>): string {
  const base = env.XDG_CONFIG_HOME !== undefined && path.isAbsolute(env.XDG_CONFIG_HOME)
    ? env.XDG_CONFIG_HOME
    : path.join(env.HOME !== undefined && env.HOME !== '' ? env.HOME : os.homedir(), '.config')
  return path.join(base, 'reaktor', 'credentials.json')
}

/**
 * Refuses a file or folder another user owns (root aside, who could change it anyway). In a shared
 * XDG_CONFIG_HOME another user could have made the folder first: they could then swap the file for
 * one naming their service, which would receive the next login's password and every command's token.
 */
async function assertOwn (target: string, kind: 'file' | 'folder'): Promise<Stats> {
  const stats = await fs.stat(target)
  const uid = process.getuid?.()
  if (uid !== undefined && stats.uid !== uid && stats.uid !== 0) {
    throw new CliError(EXIT.error, `${target} belongs to another user (uid ${stats.uid}): not used; remove it, or set XDG_CONFIG_HOME to a ${kind === 'file' ? 'folder' : 'place'} of your own`)
  }
  if (kind === 'folder' && !stats.isDirectory()) throw new CliError(EXIT.error, `${target} is not a folder: remove it, then run "reaktor login" again`)
  return stats
}

export async function readStoredLogin (env: Record<string, string | undefined>): Promise<StoredLogin | undefined> {
  const file = credentialsPath(env)
  let text: string
  try {
    await assertOwn(path.dirname(file), 'folder')
    await assertOwn(file, 'file')
    text = await fs.readFile(file, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    if (err instanceof CliError) throw err
    throw new CliError(EXIT.error, `cannot read ${file}: ${(err as Error).message}`)
  }
  try {
    const login = JSON.parse(text) as Partial<StoredLogin>
    if (typeof login.url === 'string' && typeof login.token === 'string' && typeof login.tokenId === 'string' && typeof login.username === 'string') {
      return login as StoredLogin
    }
  } catch {
    // Not JSON: the same answer as JSON of the wrong shape.
  }
  throw new CliError(EXIT.error, `${file} is not a stored login: remove it, then run "reaktor login" again`)
}

/**
 * Written owner-only (0600, in a 0700 folder: one made looser before is tightened), replaced in one
 * rename: never readable by others, never half-written. The temporary file has an unguessable name
 * and is created exclusively, so a file or symlink placed there beforehand is never written through.
 */
export async function writeStoredLogin (env: Record<string, string | undefined>, login: StoredLogin): Promise<string> {
  const file = credentialsPath(env)
  const folder = path.dirname(file)
  await fs.mkdir(folder, { recursive: true, mode: 0o700 })
  if (((await assertOwn(folder, 'folder')).mode & 0o077) !== 0) await fs.chmod(folder, 0o700)
  const temporary = `${file}.${randomBytes(12).toString('hex')}.tmp`
  await fs.writeFile(temporary, JSON.stringify(login, null, 2) + '\n', { mode: 0o600, flag: 'wx' })
  try {
    await fs.chmod(temporary, 0o600)
    await fs.rename(temporary, file)
  } catch (err) {
    await fs.rm(temporary, { force: true })
    throw err
  }
  return file
}

/** True when there was a stored login to remove. */
export async function removeStoredLogin (env: Record<string, string | undefined>): Promise<boolean> {
  try {
    await fs.unlink(credentialsPath(env))
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false
    throw err
  }
}
