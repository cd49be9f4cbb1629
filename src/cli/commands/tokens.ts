import { Argument, InvalidArgumentError } from 'commander'
import { isDuration } from '../../lib/duration.js'
import { CliError, EXIT, type CommandModule } from '../context.js'
import { formatTable, printable, printJson } from '../output.js'

interface TokenView { id: string, name: string, owner: string, createdAt: string, lastUsedAt: string | null, expiresAt: string | null }
interface CreatedToken { id: string, name: string, token: string, createdAt: string, expiresAt: string | null }

function duration (value: string): string {
  if (!isDuration(value)) throw new InvalidArgumentError('expected an integer and a unit (ms, s, m, h or d), e.g. 90d')
  return value
}

/**
 * The service refuses to let an API token create tokens (a leaked one must not mint others that
 * outlive its revocation), so the 403 says where a login session comes from.
 */
const NEEDS_SESSION = 'creating an API token needs a login session, and the token in use is an API token. ' +
  '"reaktor login" signs in with your password and creates the API token it stores for this command; ' +
  'for a token of a script, set REAKTOR_TOKEN to the token of a login session (POST /api/v1/auth/login) and run this again'

/** `reaktor tokens …` over `/api/v1/tokens`. */
export const tokensCommands: CommandModule = (program, context) => {
  const { io } = context
  const tokens = program.command('tokens')
    .description('API tokens for scripts: list, create, revoke')
    .addHelpText('after', '\nExample:\n  reaktor tokens list')

  tokens.command('list')
    .description('your API tokens (an admin: everyone\'s), oldest first; never the tokens themselves')
    .addHelpText('after', '\nExamples:\n  reaktor tokens list\n  reaktor --json tokens list')
    .action(async () => {
      const answer = await (await context.api()).request<{ tokens: TokenView[] }>('GET', '/tokens')
      if (context.json()) return printJson(io, answer)
      io.stdout.write(formatTable(answer.tokens, [
        { header: 'ID', value: (t) => t.id },
        { header: 'NAME', value: (t) => t.name },
        { header: 'OWNER', value: (t) => t.owner },
        { header: 'CREATED', value: (t) => t.createdAt },
        { header: 'LAST USED', value: (t) => t.lastUsedAt ?? 'never' },
        { header: 'EXPIRES', value: (t) => t.expiresAt ?? 'never' }
      ]))
    })

  tokens.command('create')
    .description('create an API token acting as you; the token is printed alone on stdout, shown this once (needs a login session)')
    .addArgument(new Argument('<name>', 'what the token is for, e.g. the script using it'))
    .option('--expires-in <duration>', 'lifetime from 1m to 3650d, e.g. 90d (default: never expires)', duration)
    .addHelpText('after', '\nExample:\n  TOKEN=$(reaktor tokens create "nightly export" --expires-in 90d)')
    .action(async (name: string, opts: { expiresIn?: string }) => {
      const answer = await (await context.api()).request<CreatedToken | null>('POST', '/tokens', { body: { name, expiresIn: opts.expiresIn }, allow: [403] })
      if (answer === null) throw new CliError(EXIT.auth, NEEDS_SESSION)
      if (context.json()) return printJson(io, answer)
      io.stderr.write(printable(`API token "${answer.name}" created: id ${answer.id}, expires ${answer.expiresAt ?? 'never'}. The token follows, shown this once:\n`))
      io.stdout.write(`${printable(answer.token)}\n`)
    })

  tokens.command('revoke')
    .description('revoke an API token (yours; an admin: anyone\'s): every node refuses it within a second')
    .addArgument(new Argument('<id>', 'the token id, as "reaktor tokens list" shows it'))
    .addHelpText('after', '\nExample:\n  reaktor tokens revoke 6f1c2d3e-…')
    .action(async (id: string) => {
      const answer = await (await context.api()).request<{ message: string }>('DELETE', `/tokens/${encodeURIComponent(id)}`)
      if (context.json()) return printJson(io, answer)
      io.stdout.write(`${printable(answer.message)}\n`)
    })
}
