import { isIPv4, isIPv6 } from 'node:net'

/** Counts per key in fixed windows that start at a key's first count; bounded in keys. */
class WindowCounts {
  private readonly entries = new Map<string, { count: number, resetAt: number }>()

  constructor (private readonly windowMs: number, private readonly maxKeys: number, private readonly now: () => number) {}

  /** The live count of a key and when its window ends (count 0 when none). */
  get (key: string): { count: number, resetAt: number } {
    const entry = this.entries.get(key)
    if (entry === undefined || entry.resetAt <= this.now()) return { count: 0, resetAt: 0 }
    return entry
  }

  add (key: string, delta: number): void {
    const now = this.now()
    let entry = this.entries.get(key)
    if (entry === undefined || entry.resetAt <= now) {
      if (delta <= 0) {
        this.entries.delete(key)
        return
      }
      this.makeRoom(now)
      entry = { count: 0, resetAt: now + this.windowMs }
      this.entries.delete(key)
      this.entries.set(key, entry)
    }
    entry.count = Math.max(0, entry.count + delta)
  }

  delete (key: string): void {
    this.entries.delete(key)
  }

  get size (): number {
    return this.entries.size
  }

  /** Drops ended windows; when still full, the oldest (Map order is insertion order). */
  private makeRoom (now: number): void {
    if (this.entries.size < this.maxKeys) return
    for (const [key, entry] of this.entries) if (entry.resetAt <= now) this.entries.delete(key)
    while (this.entries.size >= this.maxKeys) this.entries.delete(this.entries.keys().next().value as string)
  }
}

export interface LoginThrottleOptions {
  /** LOGIN_RATE_LIMIT: failed logins a minute per (username, address). */
  limit: number
  now?: () => number
  /** Keys kept per counter (memory bound). */
  maxKeys?: number
}

const MINUTE_MS = 60_000
/** A person mistyping a username or two behind a shared address (office NAT) still has room. */
const ADDRESS_FACTOR = 3
/** Far above what people type: many addresses guessing one account. */
const USERNAME_FACTOR = 10
const USERNAME_WINDOW_MS = 15 * MINUTE_MS

/**
 * Which login attempts go ahead. Only failures count: a script that logs in for every call is never
 * limited, and nobody can exhaust a budget that someone else's correct password needs.
 *
 * An address is a client as `clientOf` sees it (an IPv6 client: its /64).
 *
 * - per (username, address): `limit` failures a minute;
 * - per address: 3 × `limit` failures a minute, across usernames (password spraying);
 * - per username: past 10 × `limit` failures in 15 minutes the account is under a distributed
 *   attack, and each (username, address) pair gets one failure a minute instead of `limit`. An
 *   address without failures of its own is still let through, so a correct password from an
 *   unrelated address is never refused because of someone else's failures.
 *
 * An attempt counts as a failure from the moment it is let through until it succeeds (then it is
 * taken back): concurrent guesses cannot all pass the check before the first one has failed.
 * Counters live in memory, per node.
 */
export class LoginThrottle {
  private readonly pairs: WindowCounts
  private readonly addresses: WindowCounts
  private readonly usernames: WindowCounts
  private readonly now: () => number

  constructor (private readonly opts: LoginThrottleOptions) {
    const now = this.now = opts.now ?? Date.now
    const maxKeys = opts.maxKeys ?? 100_000
    this.pairs = new WindowCounts(MINUTE_MS, maxKeys, now)
    this.addresses = new WindowCounts(MINUTE_MS, maxKeys, now)
    this.usernames = new WindowCounts(USERNAME_WINDOW_MS, maxKeys, now)
  }

  /**
   * 0 when the attempt may go ahead (it is counted as failed until `succeeded`), else the seconds
   * until it would be allowed, and which counters refuse it.
   */
  begin (username: string, ip: string | undefined): { retryAfterSeconds: number, limitedBy: string[] } {
    const { user, address, pairKey } = keysOf(username, ip)
    const { limit } = this.opts
    const pair = this.pairs.get(pairKey)
    const byAddress = this.addresses.get(address)
    const byUser = this.usernames.get(user)
    const pairLimit = byUser.count >= USERNAME_FACTOR * limit ? 1 : limit
    const refused: Array<[string, number]> = []
    if (pair.count >= pairLimit) refused.push([pairLimit < limit ? 'username' : 'username and address', pair.resetAt])
    if (byAddress.count >= ADDRESS_FACTOR * limit) refused.push(['address', byAddress.resetAt])
    if (refused.length > 0) {
      const resetAt = Math.max(...refused.map(([, at]) => at))
      return { retryAfterSeconds: Math.max(1, Math.ceil((resetAt - this.now()) / 1000)), limitedBy: refused.map(([by]) => by) }
    }
    this.pairs.add(pairKey, 1)
    this.addresses.add(address, 1)
    this.usernames.add(user, 1)
    return { retryAfterSeconds: 0, limitedBy: [] }
  }

  /** Keys held by the largest counter (bounded by maxKeys). */
  get size (): number {
    return Math.max(this.pairs.size, this.addresses.size, this.usernames.size)
  }

  /**
   * Takes back an attempt `begin` let through that got no answer about its password (the database
   * could not be asked): it is no failure, and the earlier failures stay counted.
   */
  unanswered (username: string, ip: string | undefined): void {
    const { user, address, pairKey } = keysOf(username, ip)
    this.pairs.add(pairKey, -1)
    this.addresses.add(address, -1)
    this.usernames.add(user, -1)
  }

  /** Takes back an attempt `begin` let through: it succeeded. The pair starts afresh. */
  succeeded (username: string, ip: string | undefined): void {
    const { user, address, pairKey } = keysOf(username, ip)
    this.pairs.delete(pairKey)
    this.addresses.add(address, -1)
    this.usernames.add(user, -1)
  }
}

/**
 * The client an address stands for. An IPv6 client is its /64: that is what one ISP customer or
 * one cloud machine is given, and it picks any of its 2^64 addresses at will, so counted per
 * address each guess could come from a fresh budget. An IPv4-mapped IPv6 address is its IPv4 one.
 */
function clientOf (ip: string | undefined): string {
  // Undefined once the client has gone (a closed socket has no remote address).
  if (typeof ip !== 'string') return ''
  const address = ip.split('%', 1)[0].toLowerCase()
  if (!isIPv6(address)) return address
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(address)
  if (mapped !== null && isIPv4(mapped[1])) return mapped[1]
  const [head, tail] = address.split('::') as [string, string | undefined]
  const groups = (part: string | undefined): string[] => part === undefined || part === '' ? [] : part.split(':')
  const [before, after] = [groups(head), groups(tail)]
  // An embedded IPv4 tail (::1.2.3.4) fills the last two groups: never within the first four.
  const missing = 8 - before.length - after.length - (after.some((g) => g.includes('.')) || before.some((g) => g.includes('.')) ? 1 : 0)
  const full = tail === undefined ? before : [...before, ...Array<string>(missing).fill('0'), ...after]
  return `${full.slice(0, 4).map((g) => parseInt(g, 16).toString(16)).join(':')}::/64`
}

/** The keys of an attempt in the three counters; usernames differing in case or surrounding spaces share them. */
function keysOf (username: string, ip: string | undefined): { user: string, address: string, pairKey: string } {
  const user = username.trim().toLowerCase()
  const address = clientOf(ip)
  return { user, address, pairKey: `${address} ${user}` }
}
