import { main } from './main.js'

// A reader that stops early (`reaktor polling list | head -1`) closes the pipe: end quietly, as
// other command-line tools do, instead of with a stack trace.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0)
  throw err
})

/** `reaktor …` (package.json `bin`, through bin/reaktor.js). */
process.exitCode = await main(process.argv.slice(2), { env: process.env, stdin: process.stdin, stdout: process.stdout, stderr: process.stderr })
