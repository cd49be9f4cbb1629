import { parseArgs } from 'node:util'
import { hashPassword, randomPassword } from '../auth/password.js'
import { resetPassword } from '../auth/reset-password.js'
import { readAll } from '../lib/read-all.js'
import { ConfigError, loadConfig } from '../config.js'
import { startEmbeddedPostgres } from '../db/embedded.js'
import { FolderInUseError } from '../db/folder-lock.js'
import { createDatabase } from '../db/index.js'
import { passwordProblem } from '../lib/user-rules.js'

/** Exit codes of the command (docs/accounts.md "The first admin and a lost admin password"). */
export const RESET_EXIT = { ok: 0, failed: 1, usage: 2, unknownUser: 3 } as const

/** Where the command reads and writes: the process's own streams, or a test's. */
export interface CommandIo {
  env: Record<string, string | undefined>
  stdin: AsyncIterable<Buffer | string>
  stdout: { write: (text: string) => unknown }
  stderr: { write: (text: string) => unknown }
}

/** How the command is invoked, for its usage line (another front end passes its own). */
const DEFAULT_INVOCATION = 'npm run admin:reset-password --'

/**
 * Resets a user's password from the command line: `[--password-stdin] <username>`. Without
 * `--password-stdin` a random password is set and printed on stdout, alone on its line (so that a
 * script can capture it); everything else goes to stderr. Returns the exit code (RESET_EXIT).
 *
 * Reaches the database like the service does: DATABASE_URL, or else the embedded PostgreSQL of
 * DATA_DIR, which only one process may run at a time (stop the service first).
 */
export async function resetPasswordCommand (args: readonly string[], io: CommandIo, invocation = DEFAULT_INVOCATION): Promise<number> {
  const usage = `usage: ${invocation} [--password-stdin] <username>`
  const fail = (code: number, message: string): number => {
    io.stderr.write(`reaktor-service: ${message}\n`)
    return code
  }
  let parsed
  try {
    parsed = parseArgs({ args: [...args], options: { 'password-stdin': { type: 'boolean' }, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true })
  } catch (err) {
    return fail(RESET_EXIT.usage, `${(err as Error).message}\n${usage}`)
  }
  if (parsed.values.help === true) {
    io.stdout.write(`${usage}\nSets a new password (random and printed, or read from stdin with --password-stdin), enables the user, and ends every session and API token of the user.\n`)
    return RESET_EXIT.ok
  }
  if (parsed.positionals.length !== 1 || parsed.positionals[0].trim() === '') return fail(RESET_EXIT.usage, `name exactly one user\n${usage}`)
  // Stored usernames carry no surrounding spaces; a pasted name may.
  const username = parsed.positionals[0].trim()

  const generated = parsed.values['password-stdin'] !== true
  // One line break at the end is the `echo` or the terminal's, not part of the password.
  const password = generated ? randomPassword() : (await readAll(io.stdin)).replace(/\r?\n$/, '')
  const problem = passwordProblem(password)
  if (problem !== null) return fail(RESET_EXIT.usage, `${problem}; nothing was changed`)

  let config
  try {
    config = loadConfig(io.env)
  } catch (err) {
    return fail(RESET_EXIT.failed, `${err instanceof ConfigError ? 'invalid configuration: ' : ''}${(err as Error).message}`)
  }
  const log = { info: (_o: object, m: string) => io.stderr.write(`${m}\n`), warn: (_o: object, m: string) => io.stderr.write(`${m}\n`) }
  let embedded
  try {
    embedded = config.databaseUrl === undefined ? await startEmbeddedPostgres({ dataDir: config.dataDir, storeDir: config.embeddedPostgresDir, log }) : undefined
  } catch (err) {
    const cause = (err as Error).cause
    if (!(cause instanceof FolderInUseError)) return fail(RESET_EXIT.failed, (err as Error).message)
    // Only one process runs the embedded database: here, the service itself.
    return fail(RESET_EXIT.failed, `the embedded PostgreSQL of DATA_DIR ${config.dataDir} is in use by a running service` +
      `${cause.holderPid === undefined ? '' : ` (pid ${cause.holderPid})`}: stop it, run this command, then start it again; nothing was changed`)
  }
  const { db } = createDatabase(config.databaseUrl ?? embedded!.url, { max: 1, applicationName: 'reaktor-service reset-password' })
  try {
    const reset = await resetPassword(db, username, await hashPassword(password), { node: config.nodeId, via: 'command line' })
    if (reset === null) return fail(RESET_EXIT.unknownUser, `there is no user ${JSON.stringify(username)}; nothing was changed`)
    io.stderr.write(`The password of user ${JSON.stringify(reset.username)} is reset${reset.enabled ? ', the user is enabled again,' : ''} and every session and API token of the user has ended.\n`)
    if (generated) {
      io.stderr.write('The new password follows; it is not shown again:\n')
      io.stdout.write(`${password}\n`)
    }
    return RESET_EXIT.ok
  } catch (err) {
    // undefined_table, undefined_column: a database the service (of this version) has not started on yet.
    const code = (err as { code?: unknown }).code
    const hint = code === '42P01' || code === '42703' ? ' (the database is not on this version\'s schema: run `npm run db:migrate` first)' : ''
    return fail(RESET_EXIT.failed, `could not reset the password: ${(err as Error).message}${hint}`)
  } finally {
    await db.destroy()
    await embedded?.stop()
  }
}
