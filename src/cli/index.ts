import { main } from './main.js'

/** `reaktor …` (package.json `bin`, through bin/reaktor.js). */
process.exitCode = await main(process.argv.slice(2), { env: process.env, stdin: process.stdin, stdout: process.stdout, stderr: process.stderr })
