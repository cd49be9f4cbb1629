import { main } from './main.js'

// A reader that stops early (`reaktor polling list | head -1`) closes the pipe: end quietly, as
// other command-line tools do, instead of with a stack trace. Output that cannot be written at all
// (a full disk) is a failure, said in one line: a script must not take the cut output for the answer.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0)
  process.stderr.write(`reaktor: cannot write the output: ${err.code ?? err.message}\n`)
  process.exit(1)
})

/** `reaktor …` (package.json `bin`, through bin/reaktor.js). */
process.exitCode = await main(process.argv.slice(2), { env: process.env, stdin: process.stdin, stdout: process.stdout, stderr: process.stderr })
