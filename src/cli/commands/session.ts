import os from 'node:os'
import { InvalidArgumentError, Option } from 'commander'
import { isDuration } from '../../lib/duration.js'
import { ApiClient, requestTimeoutMs } from '../client.js'
import { CliError, EXIT, type CliContext, type CommandModule } from '../context.js'
import { credentialsPath, readStoredLogin, removeStoredLogin, writeStoredLogin, type StoredLogin } from '../credentials.js'
import { formatFields, printable, printJson } from '../output.js'
import { promptLine, promptSecret, secretFromStdin } from '../prompt.js'

interface CreatedToken { id: string, token: string, expiresAt: string | null }
interface Me { username: string, role: string, kind: string, tokenId?: string, expiresAt: string | null }

/** `reaktor login`, `reaktor logout`, `reaktor whoami`. */
export const sessionCommands: CommandModule = (program, context) => {
  program.command('login')
    .description('log in and store an API token for this machine (the password is never stored)')
    .option('--username <name>', 'the username (asked when not given)')
    .option('--password-stdin', 'read the password from stdin instead of asking for it')
    .addOption(new Option('--expires-in <duration>', 'how long the stored token lasts, 1m to 3650d, or "never"').default('90d').argParser(expiresIn))
    .addHelpText('after', `
The password is asked without echo, or read from stdin with --password-stdin; never an argument.
The token is stored owner-only (0600) in $XDG_CONFIG_HOME/reaktor/credentials.json
(default ~/.config/reaktor/credentials.json), for the URL it was made for.

Example:
  $ reaktor login --url http://reaktor.internal:3000 --username alice
  $ reaktor login --username ci --password-stdin --expires-in 1d < password.txt`)
    .action(async (options: { username?: string, passwordStdin?: boolean, expiresIn: string }) => {
      await login(context, options)
    })

  program.command('logout')
    .description('revoke the stored API token and remove it from this machine')
    .addHelpText('after', `
Example:
  $ reaktor logout`)
    .action(async () => { await logout(context) })

  program.command('whoami')
    .description('show who the token belongs to (its user, role and expiry)')
    .addHelpText('after', `
Example:
  $ reaktor whoami --json`)
    .action(async () => {
      const api = await context.api()
      const me = await api.request<Me>('GET', '/auth/me')
      if (context.json()) return printJson(context.io, me)
      context.io.stdout.write(formatFields([
        ['url', api.url],
        ['username', me.username],
        ['role', me.role],
        ['credential', me.kind === 'token' ? `API token ${me.tokenId ?? ''}`.trim() : 'login session'],
        ['expires', me.expiresAt ?? 'never']
      ]))
    })
}

async function login (context: CliContext, options: { username?: string, passwordStdin?: boolean, expiresIn: string }): Promise<void> {
  const { io } = context
  if (options.passwordStdin === true && options.username === undefined) {
    throw new CliError(EXIT.usage, '--password-stdin needs --username: stdin carries the password')
  }
  // Only the URL (and timeout) of the resolved client is used: the login makes its own token.
  const api = await context.api()
  const { url } = api
  const username = options.username ?? await promptLine(io, 'Username: ', 'give it with --username')
  const password = options.passwordStdin === true ? await secretFromStdin(io) : await promptSecret(io, 'Password: ')
  if (username.trim() === '' || password === '') throw new CliError(EXIT.usage, 'the username and the password must not be empty')

  const anonymous = api.withToken(undefined)
  const { token: sessionToken } = await anonymous.request<{ token: string }>('POST', '/auth/login', { auth: false, body: { username, password } })
  const session = api.withToken(sessionToken)
  let created: CreatedToken
  try {
    const body: { name: string, expiresIn?: string } = { name: `reaktor CLI on ${os.hostname()}`.slice(0, 100) }
    if (options.expiresIn !== 'never') body.expiresIn = options.expiresIn
    created = await session.request<CreatedToken>('POST', '/tokens', { body })
  } finally {
    // The session was only the way to the API token: it must not outlive this command.
    await session.request('POST', '/auth/logout', { allow: [401] }).catch((err: Error) => {
      io.stderr.write(`reaktor: warning: the login session could not be ended (it expires by itself): ${err.message}\n`)
    })
  }
  const tokenClient = api.withToken(created.token)
  const me = await tokenClient.request<Me>('GET', '/auth/me')
  const previous = await readStoredLogin(io.env).catch(() => undefined)
  const stored: StoredLogin = { url, username: me.username, token: created.token, tokenId: created.id }
  const file = await writeStoredLogin(io.env, stored)
  // The login it replaces would otherwise stay a live token that nothing on this machine knows of.
  if (previous !== undefined && previous.tokenId !== created.id) await revokeQuietly(previous, api.timeoutMs)

  if (context.json()) return printJson(io, { url, username: me.username, tokenId: created.id, expiresAt: created.expiresAt, credentialsFile: file })
  io.stdout.write(printable(`Logged in to ${url} as ${me.username} (${me.role}); token ${created.id} ${created.expiresAt === null ? 'never expires' : `expires ${created.expiresAt}`}, stored in ${file}`) + '\n')
}

// Checked before the password is asked: a typo in the duration should not cost a login attempt.
function expiresIn (value: string): string {
  if (value !== 'never' && !isDuration(value)) throw new InvalidArgumentError('a duration such as 30m, 12h or 90d, or "never"')
  return value
}

async function revokeQuietly (login: StoredLogin, timeoutMs: number): Promise<void> {
  await new ApiClient(login.url, login.token, timeoutMs).request('DELETE', `/tokens/${encodeURIComponent(login.tokenId)}`, { allow: [401, 403, 404] }).catch(() => undefined)
}

async function logout (context: CliContext): Promise<void> {
  const { io } = context
  const stored = await readStoredLogin(io.env)
  if (stored === undefined) {
    io.stderr.write(`reaktor: not logged in (no ${credentialsPath(io.env)})\n`)
    return
  }
  const client = new ApiClient(stored.url, stored.token, requestTimeoutMs(io.env))
  let known: unknown
  try {
    known = await client.request('DELETE', `/tokens/${encodeURIComponent(stored.tokenId)}`, { allow: [401, 404] })
  } catch (err) {
    // Kept: removing it would leave a live token on the service that nobody can revoke from here.
    if (err instanceof CliError) throw new CliError(err.exitCode, `${err.message}; the stored login is kept, run "reaktor logout" again`)
    throw err
  }
  await removeStoredLogin(io.env)
  const revoked = known !== null
  if (context.json()) return printJson(io, { url: stored.url, username: stored.username, tokenId: stored.tokenId, revoked })
  if (revoked) {
    io.stdout.write(`Logged out of ${stored.url}: token ${stored.tokenId} revoked, ${credentialsPath(io.env)} removed\n`)
  } else {
    io.stdout.write(`Logged out of ${stored.url}: the service no longer knew token ${stored.tokenId} (expired or revoked); ${credentialsPath(io.env)} removed\n`)
  }
}
