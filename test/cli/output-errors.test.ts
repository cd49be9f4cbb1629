/**
 * `reaktor` when its output cannot be written (stdout on a full device): one line on stderr and
 * exit 1, never a stack trace, and never exit 0 as if the output had been written.
 */
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { ROOT } from '../helpers/paths.js'

t.test('stdout on /dev/full: exit 1 and one line saying so', async (t) => {
  const full = fs.openSync('/dev/full', 'w')
  t.teardown(() => fs.closeSync(full))
  // --help needs no service: its one write meets the full device.
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'reaktor.js'), '--help'], { cwd: ROOT, env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', full, 'pipe'] })
  let stderr = ''
  child.stderr?.setEncoding('utf8').on('data', (s: string) => { stderr += s })
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  t.equal(code, 1)
  t.equal(stderr, 'reaktor: cannot write the output: ENOSPC\n')
})
