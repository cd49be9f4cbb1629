/**
 * A network namespace of a test's own, joined to the host by a veth pair: a real network path on
 * this machine whose packets nft can drop, so that both kernels see silence (retransmissions,
 * keepalive probes and all). Names and the /24 are unique per run; the namespace (and with it the
 * veth pair and any nft table inside it) is removed at teardown even when the test fails.
 */
import { execFile } from 'node:child_process'
import { randomBytes, randomInt } from 'node:crypto'
import { promisify } from 'node:util'
import type { TestContext } from './test-context.js'
import { missingCommand, nft, tableName } from './netfilter.js'

const execFileAsync = promisify(execFile)

export interface Netns {
  name: string
  /** Addresses on the host end of the veth pair (the namespace reaches the host through them). */
  hostAddresses: [string, string]
  /** The namespace's own address. */
  nsAddress: string
  subnet: string
  /** Drops every packet between the namespace and `hostAddress`, both ways, inside the namespace. Returns the heal. */
  cut: (hostAddress: string) => Promise<() => Promise<void>>
}

async function ip (...args: string[]): Promise<void> {
  await execFileAsync('ip', args)
}

/** Why a namespace cannot be made here (not root, no `ip`/`nft`, no permission), or false. */
export async function netnsUnavailable (): Promise<string | false> {
  if (process.getuid?.() !== 0) return 'not root'
  const missing = await missingCommand(['ip', '-V'], ['nft', '--version'])
  return missing === undefined ? false : `no ${missing} command`
}

export async function createNetns (t: TestContext): Promise<Netns> {
  const id = randomBytes(3).toString('hex')
  const name = `reaktor-${id}`
  const hostIf = `rk${id}h`
  const nsIf = `rk${id}n`
  const net = `10.231.${randomInt(256)}`
  await ip('netns', 'add', name)
  t.teardown(async () => {
    // Deleting the namespace destroys its veth end, and with it the host end.
    await ip('netns', 'del', name).catch(() => {})
    await ip('link', 'del', hostIf).catch(() => {})
  })
  await ip('link', 'add', hostIf, 'type', 'veth', 'peer', 'name', nsIf)
  await ip('link', 'set', nsIf, 'netns', name)
  const hostAddresses: [string, string] = [`${net}.1`, `${net}.3`]
  for (const address of hostAddresses) await ip('addr', 'add', `${address}/24`, 'dev', hostIf)
  await ip('link', 'set', hostIf, 'up')
  await ip('netns', 'exec', name, 'ip', 'addr', 'add', `${net}.2/24`, 'dev', nsIf)
  await ip('netns', 'exec', name, 'ip', 'link', 'set', nsIf, 'up')
  await ip('netns', 'exec', name, 'ip', 'link', 'set', 'lo', 'up')
  return {
    name,
    hostAddresses,
    nsAddress: `${net}.2`,
    subnet: `${net}.0/24`,
    cut: async (hostAddress) => {
      const table = tableName()
      await nft(`table inet ${table} {
  chain in { type filter hook input priority 0; policy accept; ip saddr ${hostAddress} drop; }
  chain out { type filter hook output priority 0; policy accept; ip daddr ${hostAddress} drop; }
}
`, name)
      let healed = false
      return async () => {
        if (healed) return
        healed = true
        await nft(`delete table inet ${table}\n`, name)
      }
    }
  }
}
