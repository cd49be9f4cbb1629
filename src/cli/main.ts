import { Command, CommanderError, Option } from 'commander'
import { ApiClient, DEFAULT_URL, requestTimeoutMs } from './client.js'
import { CliError, EXIT, nonEmpty, type CliContext, type CliIo, type CommandModule } from './context.js'
import { readStoredLogin } from './credentials.js'
import { commandModules } from './commands/index.js'
import { printable } from './output.js'

/** The version the CLI reports: the service's own (package.json). */
const VERSION = '0.1.0'

/** The URL and token the commands use (see CliContext.api). */
async function resolveApi (io: CliIo, urlOption: string | undefined): Promise<ApiClient> {
  const given = urlOption ?? nonEmpty(io.env.REAKTOR_URL)
  // With both the URL and the token given, the stored login plays no part: not even read. Else a
  // stored login that cannot be read (a truncated file) must not block REAKTOR_TOKEN, nor the login
  // that replaces it: without it the command goes on as if there were none, and says so.
  const stored = given !== undefined && nonEmpty(io.env.REAKTOR_TOKEN) !== undefined
    ? undefined
    : await readStoredLogin(io.env).catch((err: unknown) => {
      if (!(err instanceof CliError)) throw err
      io.stderr.write(`reaktor: warning: ${err.message} (ignored here)\n`)
      return undefined
    })
  const url = given ?? stored?.url ?? DEFAULT_URL
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw new CliError(EXIT.usage, `not a URL: ${JSON.stringify(url)} (expected e.g. ${DEFAULT_URL})`)
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new CliError(EXIT.usage, `not an http(s) URL: ${url}`)
  const token = nonEmpty(io.env.REAKTOR_TOKEN) ?? (stored !== undefined && sameService(stored.url, parsed) ? stored.token : undefined)
  return new ApiClient(parsed.origin, token, requestTimeoutMs(io.env))
}

// A stored token goes only to the service it was made for: never to another URL given by --url or REAKTOR_URL.
function sameService (storedUrl: string, url: URL): boolean {
  try {
    return new URL(storedUrl).origin === url.origin
  } catch {
    return false
  }
}

/** The whole command tree, writing to `io`. */
function buildProgram (io: CliIo, modules: readonly CommandModule[] = commandModules): Command {
  const program = new Command('reaktor')
  program
    .description('Operate a reaktor service: polling reaktors, published apps, users, API tokens, the audit log, and the database.')
    .version(VERSION, '-V, --version')
    .addOption(new Option('--json', 'print JSON for scripts instead of tables'))
    .addOption(new Option('--url <url>', 'the service, e.g. http://127.0.0.1:3000 (default: REAKTOR_URL, else the stored login, else http://127.0.0.1:3000)'))
    .configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s), outputError: (s, write) => write(s) })
    .exitOverride()
    .addHelpText('after', `
Environment: REAKTOR_URL and REAKTOR_TOKEN override the stored login; REAKTOR_TIMEOUT bounds
each request (default 30s).
Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 not authenticated or forbidden.

Examples:
  $ reaktor login --username admin --url http://127.0.0.1:3000
  $ reaktor polling list --state running
  $ reaktor --json polling status drain-demo
  $ reaktor apps publish ./reaktor-apps/my-app
  $ reaktor polling runs --help`)
  const context: CliContext = {
    io,
    json: () => program.opts().json === true,
    api: async () => await resolveApi(io, program.opts().url as string | undefined)
  }
  for (const register of modules) register(program, context)
  usageAfterErrors(program)
  return program
}

// A usage error (a missing id, an unknown choice) shows the failing command's own usage line:
// enough to correct the call without scrolling through the whole help.
function usageAfterErrors (command: Command): void {
  const help = command.createHelp()
  command.showHelpAfterError(`Usage: ${help.commandUsage(command)}\n(add --help for more)`)
  for (const sub of command.commands) usageAfterErrors(sub)
}

/** Runs the CLI with `args` (without node and the script) and returns the exit code. */
export async function main (args: readonly string[], io: CliIo): Promise<number> {
  const program = buildProgram(io)
  try {
    await program.parseAsync([...args], { from: 'user' })
    return EXIT.ok
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help or the version asked for (`--help`, `help <command>`) ends with 0; help shown because
      // the call said nothing to do (`reaktor`, `reaktor polling`) ends with 1 there: a usage error.
      return err.exitCode === 0 ? EXIT.ok : EXIT.usage
    }
    if (err instanceof CliError) {
      // An empty message: the command has already said what went wrong (in its own words).
      if (err.message !== '') io.stderr.write(`reaktor: ${printable(err.message)}\n`)
      return err.exitCode
    }
    io.stderr.write(`reaktor: ${printable((err as Error).message)}\n`)
    return EXIT.error
  }
}
