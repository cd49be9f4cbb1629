/**
 * The command line's help and usage exits, in this process (no service): every way of asking for
 * help exits 0 with the help on stdout, and a call that says nothing to do exits 2 (usage).
 */
import { Readable } from 'node:stream'
import t from 'tap'
import { main } from '../../src/cli/main.js'

async function reaktor (...args: string[]): Promise<{ code: number, stdout: string, stderr: string }> {
  let stdout = ''
  let stderr = ''
  const code = await main(args, {
    env: {},
    stdin: Readable.from([]),
    stdout: { write: (text: string) => { stdout += text } },
    stderr: { write: (text: string) => { stderr += text } }
  })
  return { code, stdout, stderr }
}

t.test('help asked for exits 0, with the help on stdout', async (t) => {
  for (const args of [['--help'], ['help'], ['help', 'polling'], ['polling', 'help', 'list'], ['users', 'help', 'create'], ['polling', 'list', '--help']]) {
    const res = await reaktor(...args)
    t.equal(res.code, 0, `reaktor ${args.join(' ')}: exit 0`)
    t.match(res.stdout, /^Usage: reaktor/, `reaktor ${args.join(' ')}: the help on stdout`)
  }
  t.match((await reaktor('help', 'polling')).stdout, /^Usage: reaktor polling \[options\] \[command\]/, 'help <command>: that command\'s help')
})

t.test('the top-level help ends with examples, as every command\'s does', async (t) => {
  t.match((await reaktor('--help')).stdout, /\nExamples:\n {2}\$ reaktor login --username admin --url http:\/\/127\.0\.0\.1:3000\n {2}\$ reaktor polling list --state running\n/)
})

t.test('nothing to do or an unknown command: usage, exit 2, nothing on stdout', async (t) => {
  for (const args of [[], ['frobnicate'], ['polling'], ['polling', 'frobnicate']]) {
    const res = await reaktor(...args)
    t.equal(res.code, 2, `reaktor ${args.join(' ')}: exit 2`)
    t.equal(res.stdout, '', `reaktor ${args.join(' ')}: nothing on stdout`)
    t.match(res.stderr, /Usage: reaktor/)
  }
})
