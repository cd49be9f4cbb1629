import { performance } from 'node:perf_hooks'
import type pg from 'pg'
import { ListenConnection } from '../db/listen-connection.js'
import type { AuthSession } from './types.js'

/**
 * NOTIFY channel of revoked sessions and API tokens; the payload is the hex SHA-256 digest of the
 * token, `user:<id>` for every credential of a user, or '*' for all.
 */
export const SESSION_REVOKED_CHANNEL = 'reaktor_session_revoked'
export const USER_PAYLOAD_PREFIX = 'user:'

export interface SessionCacheOptions {
  url: string
  applicationName: string
  log: { warn: (obj: object, msg: string) => void }
  /**
   * A cached session is used only while the listening connection proved, this recently, that it
   * has delivered every revocation committed before (default 500 ms; must stay well under the 1 s
   * a logout may take to reach every node).
   */
  maxStalenessMs?: number
  /** How often that proof (a round trip on the listening connection) is renewed. Default 150 ms. */
  confirmIntervalMs?: number
  maxEntries?: number
}

interface Entry { session: AuthSession, digest: string }

/**
 * Verified session tokens, kept in memory so that a request does not cost a database round trip,
 * and dropped on every node within a second of a logout anywhere.
 *
 * How the second holds: a logout commits its revocation together with a NOTIFY on
 * SESSION_REVOKED_CHANNEL. Every node LISTENs on a dedicated connection and keeps pinging it.
 * PostgreSQL delivers pending notifications before it answers the next statement, so once a ping
 * that was SENT after the logout committed has been answered, the notification has been handled
 * and the entry is gone. A cached entry is served only while the last answered ping was sent at
 * most `maxStalenessMs` ago; a silent, slow or broken connection therefore makes every check go
 * to the database again (fail safe), and a reconnect starts from an empty cache because
 * notifications may have been missed meanwhile.
 *
 * A lookup that raced with a revocation (read the row before the logout committed, answered after
 * its notification) must not put the session back: `generation` grows with every revocation and a
 * result is cached only if no revocation arrived while it was being read.
 */
export class SessionCache {
  private readonly entries = new Map<string, Entry>()
  private readonly byDigest = new Map<string, string>()
  private readonly listener: ListenConnection
  private timer: NodeJS.Timeout | undefined
  private closed = false
  private pinging = false
  /** performance.now() when the last answered ping was sent; -Infinity while unconfirmed. */
  private confirmedAt = -Infinity
  private readonly maxStalenessMs: number
  private readonly confirmIntervalMs: number
  private readonly maxEntries: number
  /** Grows with every revocation seen and every lost connection. */
  generation = 0
  hits = 0

  constructor (private readonly opts: SessionCacheOptions) {
    this.maxStalenessMs = opts.maxStalenessMs ?? 500
    this.confirmIntervalMs = opts.confirmIntervalMs ?? 150
    this.maxEntries = opts.maxEntries ?? 10_000
    this.listener = new ListenConnection({
      url: opts.url,
      applicationName: opts.applicationName,
      channel: SESSION_REVOKED_CHANNEL,
      name: 'session cache',
      whileLost: 'every token check goes to the database',
      log: opts.log,
      onNotification: (digest) => this.revoke(digest),
      onReset: () => this.drop()
    })
  }

  private get client (): pg.Client | undefined {
    return this.listener.client
  }

  get size (): number {
    return this.entries.size
  }

  /** Whether cached entries may be answered right now. */
  get trusted (): boolean {
    return this.client !== undefined && performance.now() - this.confirmedAt <= this.maxStalenessMs
  }

  /** Connects and LISTENs. A failure is not fatal: the cache stays unused until a reconnect works. */
  async start (): Promise<void> {
    await this.listener.start()
    await this.confirm()
    this.arm()
  }

  async stop (): Promise<void> {
    this.closed = true
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
    this.drop()
    await this.listener.stop()
  }

  /** The cached session of a token, if the cache may be trusted right now and it has not expired. */
  get (token: string): AuthSession | undefined {
    const entry = this.entries.get(token)
    if (entry === undefined) return undefined
    const expiresAt = entry.session.expiresAt
    if (!this.trusted || (expiresAt !== null && expiresAt.getTime() <= Date.now())) return undefined
    this.hits++
    return entry.session
  }

  /** Caches a live session read from the database, unless a revocation arrived since `generation`. */
  set (token: string, digest: string, session: AuthSession, generation: number): void {
    if (generation !== this.generation || this.client === undefined || this.closed) return
    if (this.entries.size >= this.maxEntries) {
      // Map order is insertion order: drop the oldest.
      const oldest = this.entries.keys().next().value as string
      this.delete(oldest)
    }
    this.entries.set(token, { session, digest })
    this.byDigest.set(digest, token)
  }

  /**
   * Forgets a revoked session or token, or (`user:<id>`) every one of a user; the local change at
   * once, other nodes through the NOTIFY.
   */
  revoke (digest: string): void {
    this.generation++
    if (digest === '*') {
      this.entries.clear()
      this.byDigest.clear()
      return
    }
    if (digest.startsWith(USER_PAYLOAD_PREFIX)) {
      // Rare (an admin's change to a user): a scan of at most maxEntries is fine.
      const userId = digest.slice(USER_PAYLOAD_PREFIX.length)
      for (const [token, entry] of this.entries) if (entry.session.userId === userId) this.delete(token)
      return
    }
    const token = this.byDigest.get(digest)
    if (token !== undefined) this.delete(token)
  }

  private delete (token: string): void {
    const entry = this.entries.get(token)
    if (entry === undefined) return
    this.entries.delete(token)
    this.byDigest.delete(entry.digest)
  }

  /** Untrusted from now on: empty, and results read before now are not cached. */
  private drop (): void {
    this.confirmedAt = -Infinity
    this.generation++
    this.entries.clear()
    this.byDigest.clear()
  }

  /** The confirmation loop: one round trip per interval on the listening connection. */
  private arm (): void {
    if (this.closed) return
    this.timer = setTimeout(() => {
      void this.confirm().finally(() => this.arm())
    }, this.confirmIntervalMs)
    this.timer.unref()
  }

  private async confirm (): Promise<void> {
    if (this.client === undefined || this.pinging) return
    this.pinging = true
    const sentAt = performance.now()
    // A slow answer leaves the entries to age out of trust meanwhile; one that never comes ends
    // the connection (the dead-connection rule), and the reconnect starts from an empty cache.
    // Notifications travel before the answer: every revocation committed before sentAt is applied.
    if (await this.listener.ping()) this.confirmedAt = Math.max(this.confirmedAt, sentAt)
    this.pinging = false
  }
}
