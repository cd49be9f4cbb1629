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

/** `$XDG_CONFIG_HOME/reaktor/credentials.json`, or `~/.config/reaktor/credentials.json`. */
export function credentialsPath (env: Record<string, string | undefined>): string {
  const base = env.XDG_CONFIG_HOME !== undefined && env.XDG_CONFIG_HOME !== ''
    ? env.XDG_CONFIG_HOME
    : path.join(env.HOME !== undefined && env.HOME !== '' ? env.HOME : os.homedir(), '.config')
  return path.join(base, 'reaktor', 'credentials.json')
}

export async function readStoredLogin (env: Record<string, string | undefined>): Promise<StoredLogin | undefined> {
  const file = credentialsPath(env)
  let text: string
  try {
    text = await fs.readFile(file, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
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

/** Written owner-only (0600, in a 0700 folder), replaced in one rename: never readable by others, never half-written. */
export async function writeStoredLogin (env: Record<string, string | undefined>, login: StoredLogin): Promise<string> {
  const file = credentialsPath(env)
  await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 })
  const temporary = `${file}.${process.pid}.tmp`
  await fs.writeFile(temporary, JSON.stringify(login, null, 2) + '\n', { mode: 0o600, flag: 'w' })
  await fs.chmod(temporary, 0o600)
  await fs.rename(temporary, file)
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
