import { Argument, InvalidArgumentError, Option, type Command } from 'commander'
import { passwordProblem, usernameProblem } from '../../lib/user-rules.js'
import { CliError, EXIT, type CliContext, type CommandModule } from '../context.js'
import { formatFields, formatTable, printable, printJson } from '../output.js'
import { confirm, promptSecret, secretFromStdin } from '../prompt.js'

interface User { id: string, username: string, role: string, disabled: boolean, createdAt: string, updatedAt: string }
interface UserWithPassword { user: User, password?: string }

const ROLES = ['admin', 'operator']

/** Where one user's routes are: the name as the service compares it, encoded as one path segment. */
const userPath = (username: string): string => `/users/${encodeURIComponent(username)}`

// The service's own rule, checked before asking it, so a bad name is a usage error like a bad option.
function username (value: string): string {
  const problem = usernameProblem(value)
  if (problem !== null) throw new InvalidArgumentError(problem)
  return value.trim()
}

const usernameArgument = (): Argument => new Argument('<username>', 'the user (compared without regard to case)').argParser(username)

function example (command: Command, ...lines: string[]): Command {
  return command.addHelpText('after', `\nExample${lines.length > 1 ? 's' : ''}:\n${lines.map((l) => `  ${l}`).join('\n')}`)
}

function checkedPassword (password: string): string {
  const problem = passwordProblem(password)
  if (problem !== null) throw new CliError(EXIT.usage, `${problem}; nothing was changed`)
  return password
}

function printUser (context: CliContext, user: User): void {
  if (context.json()) return printJson(context.io, user)
  context.io.stdout.write(formatFields([
    ['username', user.username],
    ['role', user.role],
    ['status', user.disabled ? 'disabled' : 'enabled'],
    ['id', user.id],
    ['created', user.createdAt],
    ['updated', user.updatedAt]
  ]))
}

/**
 * The answer of a create or a reset: a generated password alone on stdout (so that
 * `PASSWORD=$(reaktor users create bob)` captures it), what happened on stderr.
 */
function printWithPassword (context: CliContext, answer: UserWithPassword, done: string): void {
  if (context.json()) return printJson(context.io, answer)
  if (answer.password === undefined) {
    context.io.stderr.write(`${printable(done)}\n`)
    return printUser(context, answer.user)
  }
  context.io.stderr.write(`${printable(done)}; the generated password follows, shown this once:\n`)
  context.io.stdout.write(`${printable(answer.password)}\n`)
}

function addPasswd (parent: Command, context: CliContext): void {
  example(parent.command('passwd')
    .description('change your own password; every session and API token of yours ends, the one in use too (log in again)')
    .option('--password-stdin', 'read the current password, then the new one, as two lines of stdin instead of prompting'),
  'reaktor passwd', 'printf \'%s\\n%s\\n\' "$OLD" "$NEW" | reaktor passwd --password-stdin')
    .action(async (opts: { passwordStdin?: boolean }) => {
      const { io } = context
      let currentPassword: string
      let newPassword: string
      if (opts.passwordStdin === true) {
        const lines = (await secretFromStdin(io)).split(/\r?\n/)
        if (lines.length !== 2) throw new CliError(EXIT.usage, `expected two lines on stdin (the current password, then the new one), got ${lines.length}; nothing was changed`)
        ;[currentPassword, newPassword] = lines
      } else {
        currentPassword = await promptSecret(io, 'Current password: ')
        newPassword = await promptSecret(io, 'New password: ')
        if (await promptSecret(io, 'New password again: ') !== newPassword) throw new CliError(EXIT.usage, 'the two new passwords differ; nothing was changed')
      }
      checkedPassword(newPassword)
      const answer = await (await context.api()).request<{ message: string }>('POST', '/auth/password', { body: { currentPassword, newPassword } })
      if (context.json()) return printJson(io, answer)
      io.stdout.write(`${printable(answer.message)}\n`)
    })
}

/** `reaktor users …` (admins only, as `/api/v1/users`) and `reaktor passwd`. */
export const usersCommands: CommandModule = (program, context) => {
  const { io } = context
  const users = example(program.command('users')
    .description('manage users (admins only): list, show, create, set-role, disable, enable, reset-password, delete, passwd'),
  'reaktor users list', 'reaktor users create bob --role operator')

  example(users.command('list').description('every user, by username'), 'reaktor users list', 'reaktor --json users list')
    .action(async () => {
      const answer = await (await context.api()).request<{ users: User[] }>('GET', '/users')
      if (context.json()) return printJson(io, answer)
      io.stdout.write(formatTable(answer.users, [
        { header: 'USERNAME', value: (u) => u.username },
        { header: 'ROLE', value: (u) => u.role },
        { header: 'STATUS', value: (u) => u.disabled ? 'disabled' : 'enabled' },
        { header: 'CREATED', value: (u) => u.createdAt },
        { header: 'UPDATED', value: (u) => u.updatedAt }
      ]))
    })

  example(users.command('show').description('one user').addArgument(usernameArgument()), 'reaktor users show bob')
    .action(async (name: string) => printUser(context, await (await context.api()).request<User>('GET', userPath(name))))

  example(users.command('create')
    .description('create a user; without --password-stdin a password is generated and printed alone on stdout, once')
    .addArgument(usernameArgument())
    .addOption(new Option('--role <role>', 'what the user may do').choices(ROLES).default('operator'))
    .option('--password-stdin', 'read the password from stdin (12 to 1,024 characters; one line break at the end is dropped)'),
  'PASSWORD=$(reaktor users create bob --role operator)', 'printf \'%s\\n\' "$PASSWORD" | reaktor users create carol --role admin --password-stdin')
    .action(async (name: string, opts: { role: string, passwordStdin?: boolean }) => {
      const password = opts.passwordStdin === true ? checkedPassword(await secretFromStdin(io)) : undefined
      const answer = await (await context.api()).request<UserWithPassword>('POST', '/users', { body: { username: name, role: opts.role, password } })
      printWithPassword(context, answer, `User "${answer.user.username}" (${answer.user.role}) created`)
    })

  example(users.command('set-role')
    .description('change the role of a user (its sessions and tokens stay, with the new role)')
    .addArgument(usernameArgument())
    .addArgument(new Argument('<role>', 'the new role').choices(ROLES)),
  'reaktor users set-role bob admin')
    .action(async (name: string, role: string) => printUser(context, await (await context.api()).request<User>('PATCH', userPath(name), { body: { role } })))

  for (const [verb, disabled, what] of [['disable', true, 'disable a user: it cannot log in, and every session and API token of it ends'], ['enable', false, 'enable a disabled user again (old sessions stay ended)']] as const) {
    example(users.command(verb).description(what).addArgument(usernameArgument()), `reaktor users ${verb} bob`)
      .action(async (name: string) => printUser(context, await (await context.api()).request<User>('PATCH', userPath(name), { body: { disabled } })))
  }

  example(users.command('reset-password')
    .description('set a new password for a user (generated and printed alone on stdout unless --password-stdin); every session and API token of the user ends')
    .addArgument(usernameArgument())
    .option('--password-stdin', 'read the new password from stdin (12 to 1,024 characters; one line break at the end is dropped)'),
  'NEW=$(reaktor users reset-password bob)', 'printf \'%s\\n\' "$NEW" | reaktor users reset-password bob --password-stdin')
    .action(async (name: string, opts: { passwordStdin?: boolean }) => {
      const password = opts.passwordStdin === true ? checkedPassword(await secretFromStdin(io)) : undefined
      const answer = await (await context.api()).request<UserWithPassword>('POST', `${userPath(name)}/password`, { body: { password } })
      printWithPassword(context, answer, `The password of user "${answer.user.username}" is reset and every session and API token of the user has ended`)
    })

  example(users.command('delete')
    .description('delete a user with its sessions and API tokens; asks first unless --yes (without a terminal, --yes is needed)')
    .addArgument(usernameArgument())
    .option('-y, --yes', 'do not ask'),
  'reaktor users delete bob', 'reaktor users delete bob --yes')
    .action(async (name: string, opts: { yes?: boolean }) => {
      if (opts.yes !== true && !await confirm(io, `Delete user "${name}" with its sessions and API tokens?`, '--yes')) {
        throw new CliError(EXIT.error, `user "${name}" not deleted`)
      }
      const answer = await (await context.api()).request<{ message: string }>('DELETE', userPath(name))
      if (context.json()) return printJson(io, answer)
      io.stdout.write(`${printable(answer.message)}\n`)
    })

  addPasswd(users, context)
  addPasswd(program, context)
}
