/**
 * Packet drops for network-fault tests, with nft: a table of the test's own (a unique name, so that
 * test files running in parallel never touch each other's rules), removed at teardown even when the
 * test fails. Needs root and the `nft` command (Debian package nftables); without them a test is
 * skipped on a developer's machine with a reason, and fails under CI (CI=true) instead.
 */
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { promisify } from 'node:util'
import type { TestContext } from './test-context.js'

const execFileAsync = promisify(execFile)

/** The first of these commands (each with an argument it answers without doing anything) that cannot be run here. */
export async function missingCommand (...commands: Array<readonly [string, string]>): Promise<string | undefined> {
  for (const [command, arg] of commands) {
    if (await execFileAsync(command, [arg]).then(() => false, () => true)) return command
  }
  return undefined
}

/** Why packet-drop tests cannot run here, or false when they can. */
export async function netfilterSkip (): Promise<string | false> {
  let reason: string | undefined
  if (process.getuid?.() !== 0) reason = 'packet-drop tests need root (nft)'
  else if (await missingCommand(['nft', '--version']) !== undefined) reason = 'no nft: install the Debian package nftables to run the packet-drop tests'
  if (reason === undefined) return false
  if (process.env.CI === 'true' || process.env.CI === '1') throw new Error(reason)
  return reason
}

/** Runs an nft script (`nft -f -`), optionally inside a network namespace. */
export async function nft (script: string, netns?: string): Promise<void> {
  const [file, args] = netns === undefined ? ['nft', ['-f', '-']] : ['ip', ['netns', 'exec', netns, 'nft', '-f', '-']]
  await new Promise<void>((resolve, reject) => {
    const child = execFile(file, args, (err, _stdout, stderr) => err === null ? resolve() : reject(new Error(`nft failed: ${stderr || err.message}`)))
    child.stdin?.end(script)
  })
}

/** A unique nft table name for one test. */
export function tableName (prefix = 'reaktor_test'): string {
  return `${prefix}_${randomBytes(5).toString('hex')}`
}

/**
 * Silently drops every TCP packet from or to these local ports (both ends of loopback connections
 * go through the output hook), as a network that lost them would: no RST, no ICMP. Returns the
 * heal; the table is removed at teardown in any case.
 */
export async function dropTcpPorts (t: TestContext, ports: readonly number[]): Promise<() => Promise<void>> {
  const table = tableName()
  const set = ports.join(', ')
  let removed = false
  const heal = async (): Promise<void> => {
    if (removed) return
    removed = true
    await nft(`delete table inet ${table}\n`)
  }
  await nft(`table inet ${table} {
  chain out {
    type filter hook output priority 0; policy accept;
    tcp sport { ${set} } drop
    tcp dport { ${set} } drop
  }
}
`)
  t.teardown(heal)
  return heal
}
