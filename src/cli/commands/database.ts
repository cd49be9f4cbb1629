import { Argument } from 'commander'
import { CliError, EXIT, type ExitCode, type CommandModule } from '../context.js'
import { printJson } from '../output.js'
import { refuseTerminalStdin } from '../prompt.js'

const WHERE = 'It reaches the database as the service does: DATABASE_URL, or else the embedded PostgreSQL\n' +
  'of DATA_DIR (which only one process may run: stop the service first). --url, REAKTOR_URL and\n' +
  'REAKTOR_TOKEN play no part.'

/**
 * `reaktor migrate` and `reaktor admin reset-password`: straight on the database, for when there is
 * no service to ask (before the first start, a lost admin password). The database code is loaded
 * only here, so that the API commands start without it.
 */
export const databaseCommands: CommandModule = (program, context) => {
  const { io } = context

  program.command('migrate')
    .description('apply pending database migrations (what a starting node does), straight on the database')
    .addHelpText('after', `\n${WHERE}\n\nExamples:\n  DATABASE_URL=postgres://reaktor@db/reaktor reaktor migrate\n  DATA_DIR=/var/lib/reaktor reaktor --json migrate`)
    .action(async () => {
      const [{ migrateDatabase }, { ConfigError }] = await Promise.all([import('../migrate-database.js'), import('../../config.js')])
      let applied
      try {
        applied = await migrateDatabase(io.env, { info: (line) => io.stderr.write(`${line}\n`), warn: (line) => io.stderr.write(`${line}\n`) })
      } catch (err) {
        throw new CliError(EXIT.error, `${err instanceof ConfigError ? 'invalid configuration: ' : ''}${(err as Error).message}`)
      }
      if (context.json()) return printJson(io, { applied })
      for (const r of applied) io.stdout.write(`${r.status}: ${r.migrationName}\n`)
      if (applied.length === 0) io.stdout.write('database schema is up to date\n')
    })

  const admin = program.command('admin')
    .description('recovery straight on the database: reset-password')
    .addHelpText('after', '\nExample:\n  reaktor admin reset-password admin')
  admin.command('reset-password')
    .description('set a new password for a user (a lost admin password): printed alone on stdout unless --password-stdin; enables the user and ends its sessions and API tokens')
    .addArgument(new Argument('<username>', 'the user (compared without regard to case)'))
    .option('--password-stdin', 'read the new password from stdin (12 to 1,024 characters; one line break at the end is dropped)')
    .addHelpText('after', `\n${WHERE}\nExit codes: 0 done, 1 failed, 2 usage or password rules, 3 no such user; nothing is changed unless 0.\n\n` +
      'Examples:\n  DATABASE_URL=postgres://reaktor@db/reaktor reaktor admin reset-password admin\n  printf \'%s\\n\' "$NEW" | reaktor admin reset-password --password-stdin admin')
    .action(async (username: string, opts: { passwordStdin?: boolean }) => {
      if (opts.passwordStdin === true) refuseTerminalStdin(io)
      const { resetPasswordCommand } = await import('../reset-password-command.js')
      // With --json the password it prints is wrapped in the JSON answer instead.
      let printed = ''
      const stdout = context.json() ? { write: (text: string) => { printed += text } } : io.stdout
      const args = [...(opts.passwordStdin === true ? ['--password-stdin'] : []), '--', username]
      const code = await resetPasswordCommand(args, { env: io.env, stdin: io.stdin as AsyncIterable<Buffer | string>, stdout, stderr: io.stderr }, 'reaktor admin reset-password')
      // It has said why on stderr: only its exit code is left to pass on.
      if (code !== EXIT.ok) throw new CliError(code as ExitCode, '')
      if (context.json()) printJson(io, { username: username.trim(), ...(printed === '' ? {} : { password: printed.trim() }) })
    })
}
