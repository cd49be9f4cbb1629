import { resetPasswordCommand } from './reset-password-command.js'

/** `npm run admin:reset-password -- [--password-stdin] <username>` (see reset-password-command.ts). */
process.exitCode = await resetPasswordCommand(process.argv.slice(2), { env: process.env, stdin: process.stdin, stdout: process.stdout, stderr: process.stderr })
