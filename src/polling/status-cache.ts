import { performance } from 'node:perf_hooks'
import type pg from 'pg'
import { ListenConnection } from '../db/listen-connection.js'
import { NOTIFY_CHANNEL } from '../scheduler/index.js'

export interface StatusCacheOptions {
  url: string
  applicationName: string
  log: { warn: (obj: object, msg: string) => void }
  /**
   * How long an answer read from the database may be served for what no notification announces:
   * run results (last run, next run, errors), the owner column and the advisory locks behind it.
   * Default 100 ms. Run results reach the database in batches (every 200 ms by default) anyway.
   */
  maxAgeMs?: number
  /** How long a confirmation round trip may take before the cache is bypassed (default 500 ms). */
  syncTimeoutMs?: number
}

/** `until`: performance.now() past which it is no longer served (see `set`). */
interface Entry<V> { value: V, until: number }

interface Deferred { promise: Promise<boolean>, resolve: (ok: boolean) => void }

/** What `sync` answers when no round trip can vouch for the cache. */
const UNCONFIRMED = Promise.resolve(false)

/** Resolves with what resolve() is given, or false after `timeoutMs`: whichever comes first. */
function deferred (timeoutMs: number): Deferred {
  let settle!: (ok: boolean) => void
  const promise = new Promise<boolean>((resolve) => { settle = resolve })
  const timer = setTimeout(() => settle(false), timeoutMs)
  return { promise, resolve: (ok) => { clearTimeout(timer); settle(ok) } }
}

/**
 * The answers of `GET /polling/{id}/status` and `GET /polling` (`V`: what the reads keep of them), kept in memory without giving
 * up what a database read per request guaranteed: **a start or stop acknowledged by any node before
 * the request was sent is always visible**.
 *
 * How that holds:
 * - Every start and stop commits together with a NOTIFY on `reaktor_polling` (the scheduler's own
 *   channel, payload: the reaktor id). This cache LISTENs on a dedicated connection and drops the
 *   entry of that id (and the list) when the notification arrives.
 * - A request is answered from memory only after a round trip on that connection SENT AFTER the
 *   request arrived has been answered (`sync()`). PostgreSQL delivers pending notifications before
 *   it answers, so by then every start/stop committed before the request has dropped its entry.
 *   One round trip serves every request (of every id) that arrived while the previous one was out,
 *   or in the same turn of the event loop: an empty statement instead of a status query per request
 *   batch.
 * - A read that raced with a notification is not cached (`generation`); a lost connection empties
 *   the cache and, until a reconnect, every request reads the database (fail safe).
 *
 * What no notification announces — run results (written in batches by the owner, every 200 ms by
 * default), the owner claimed on a takeover, and an owner whose node died (its advisory lock is
 * gone) — is served at most `maxAgeMs` (100 ms) after its read answered. A run result is
 * therefore shown at most 100 ms later than with a read per request (see `set`), on top of the up
 * to 200 ms it already waits in the owner's batch before it reaches the database at all.
 */
export class StatusCache<V = string> {
  private readonly entries = new Map<string, Entry<V>>()
  private readonly listener: ListenConnection
  private closed = false
  private readonly maxAgeMs: number
  private readonly syncTimeoutMs: number
  /** performance.now() when the confirmation round trip on the wire was sent; undefined when none is. */
  private inflightSince: number | undefined
  /** The next one, not sent yet: joined by every caller until it is sent. */
  private queued: Deferred | undefined
  /** A send of the queued round trip is scheduled (see sendSoon). */
  private sendScheduled = false
  /** Grows with every notification and every lost connection: a read that spans one is not cached. */
  generation = 0

  constructor (private readonly opts: StatusCacheOptions) {
    this.maxAgeMs = opts.maxAgeMs ?? 100
    this.syncTimeoutMs = opts.syncTimeoutMs ?? 500
    this.listener = new ListenConnection({
      url: opts.url,
      applicationName: opts.applicationName,
      channel: NOTIFY_CHANNEL,
      name: 'status cache',
      whileLost: 'status reads the database',
      log: opts.log,
      onNotification: (reaktorId) => this.invalidate(reaktorId),
      onReset: () => this.drop()
    })
  }

  private get client (): pg.Client | undefined {
    return this.listener.client
  }

  /** Connects and LISTENs. A failure is not fatal: every request reads the database until a reconnect works. */
  async start (): Promise<void> {
    await this.listener.start()
  }

  async stop (): Promise<void> {
    this.closed = true
    this.drop()
    this.queued?.resolve(false)
    this.queued = undefined
    await this.listener.stop()
  }

  /**
   * The cached answer of `key` (a reaktor id, or '' for the list), if one is fresh enough to be worth
   * a confirmation. Served only after `sync()` resolved true and a second `get` still finds it.
   */
  get (key: string): V | undefined {
    const entry = this.entries.get(key)
    if (entry === undefined) return undefined
    if (performance.now() > entry.until) {
      this.entries.delete(key)
      return undefined
    }
    return entry.value
  }

  /**
   * Caches what a read started under `generation` returned, unless a notification
   * arrived since. It is served for `maxAgeMs` after the read's answer came: an answer is then at
   * most that much older than the one of a read per request, which is as old as its read is long
   * by the time it arrives. (Counted from the read's start, a read slower than `maxAgeMs`, the
   * list of thousands of reaktors on busy cores, would be too old to serve once stored.)
   */
  set (key: string, value: V, generation: number): void {
    if (generation !== this.generation || this.client === undefined || this.closed) return
    this.entries.set(key, { value, until: performance.now() + this.maxAgeMs })
  }

  /** Forgets a reaktor's status and the list (a notification, or a start/stop through this node). */
  invalidate (reaktorId: string): void {
    this.generation++
    this.entries.delete(reaktorId)
    this.entries.delete('')
  }

  /**
   * True once every notification committed before this call has been handled: a round trip on the
   * listening connection, sent after this call, was answered. False when the connection cannot
   * vouch for that (none, lost, too slow): the caller reads the database.
   */
  // Not an async function: every caller of one round trip gets its one promise, not a promise of its own around it.
  sync (): Promise<boolean> {
    if (this.client === undefined) return UNCONFIRMED
    // A round trip unanswered for longer than a caller may wait: the connection is suspect (the
    // dead-connection rule ends it after 5 s); meanwhile nobody waits for it again.
    if (this.inflightSince !== undefined && performance.now() - this.inflightSince > this.syncTimeoutMs) return UNCONFIRMED
    let waiting = this.queued
    if (waiting === undefined) {
      waiting = this.queued = deferred(this.syncTimeoutMs)
      if (this.inflightSince === undefined) this.sendSoon()
    }
    return waiting.promise
  }

  /**
   * Sends the queued round trip once the requests read in this turn of the event loop have
   * joined it (setImmediate runs after the turn's I/O callbacks): one round trip per turn, not one
   * for its first request and another for the rest.
   */
  private sendSoon (): void {
    if (this.sendScheduled) return
    this.sendScheduled = true
    setImmediate(() => {
      this.sendScheduled = false
      this.sendQueued()
    })
  }

  private sendQueued (): void {
    const waiting = this.queued
    if (waiting === undefined || this.inflightSince !== undefined) return
    this.queued = undefined
    if (this.client === undefined) {
      waiting.resolve(false)
      return
    }
    this.inflightSince = performance.now()
    // Written now, or right after the heartbeat's ping if one is out: after every waiter arrived.
    void this.listener.ping().then((ok) => {
      this.inflightSince = undefined
      waiting.resolve(ok)
      if (this.queued !== undefined) this.sendSoon()
    })
  }

  /** Empty, and reads that started before now are not cached. */
  private drop (): void {
    this.generation++
    this.entries.clear()
  }
}
