import { performance } from 'node:perf_hooks'
import type pg from 'pg'
import { dedicatedClient, PING_EVERY_MS, roundTrip } from './dedicated-connection.js'

export interface ListenConnectionOptions {
  url: string
  applicationName: string
  channel: string
  /** Names the owner in log lines, e.g. 'session cache'. */
  name: string
  /** What readers do while there is no connection, for the log lines. */
  whileLost: string
  log: { warn: (obj: object, msg: string) => void }
  onNotification: (payload: string) => void
  /** The connection was lost or (re)established: notifications may have been missed meanwhile. */
  onReset: () => void
}

/**
 * A dedicated (never pooled) connection that LISTENs on one channel and reconnects by itself with
 * backoff (100 ms doubling to 10 s). `client` is undefined while there is none; the caches built
 * on it treat that as "trust nothing, read the database". It follows the dead-connection rule of
 * src/db/dedicated-connection.ts: pinged every second unless something else answered meanwhile,
 * and ended when a round trip goes unanswered for 5 s.
 */
export class ListenConnection {
  client: pg.Client | undefined
  private closed = false
  private reconnectDelay = 100
  private heartbeat: NodeJS.Timeout | undefined
  /** performance.now() of the last answered round trip. */
  private lastOkAt = -Infinity
  /** The last round trip sent or waiting to be (settles, never rejects). */
  private inFlight: Promise<unknown> = Promise.resolve()
  /** The round trip waiting for the one in flight, not sent yet: a caller now may share it. */
  private next: Promise<boolean> | undefined

  constructor (private readonly opts: ListenConnectionOptions) {}

  /** Connects and LISTENs. A failure is not fatal: it keeps retrying in the background. */
  async start (): Promise<void> {
    this.heartbeat = setInterval(() => {
      if (performance.now() - this.lastOkAt >= PING_EVERY_MS) void this.ping()
    }, PING_EVERY_MS).unref()
    await this.connect().catch((err: unknown) => {
      this.opts.log.warn({ err }, `${this.opts.name}: could not listen on ${this.opts.channel}; ${this.opts.whileLost} until it can`)
      this.scheduleReconnect()
    })
  }

  async stop (): Promise<void> {
    this.closed = true
    clearInterval(this.heartbeat)
    const client = this.client
    this.client = undefined
    await client?.end().catch(() => {})
  }

  /**
   * A round trip on the current connection. True when it was answered and the connection is still
   * the current one: every notification committed before this call has then been handled.
   */
  async ping (): Promise<boolean> {
    const client = this.client
    if (client === undefined) return false
    // One statement at a time (pg deprecates queueing on a busy client): sent once the round trip
    // in flight, if any, is answered, so still after this call. Callers meanwhile share the one
    // waiting to be sent: on a slow server there is one out and one waiting, never a growing queue.
    if (this.next === undefined) {
      const next = this.inFlight.then(async () => {
        this.next = undefined
        // An empty statement: a round trip (PostgreSQL answers EmptyQueryResponse, then
        // ReadyForQuery, delivering pending notifications first) that executes nothing.
        await roundTrip(client, '')
      }).then(() => true, () => false)
      this.next = next
      this.inFlight = next
    }
    if (!await this.next) return false
    if (client !== this.client) return false
    this.lastOkAt = performance.now()
    return true
  }

  private async connect (): Promise<void> {
    const { opts } = this
    const client = dedicatedClient(opts.url, opts.applicationName)
    const lost = (): void => {
      if (this.client !== client) return
      this.client = undefined
      opts.onReset()
      client.end().catch(() => {})
      if (!this.closed) {
        opts.log.warn({}, `${opts.name}: listener lost; ${opts.whileLost} until it is back`)
        this.scheduleReconnect()
      }
    }
    client.on('error', lost)
    client.on('end', lost)
    client.on('notification', (msg) => {
      if (msg.channel === opts.channel && client === this.client) opts.onNotification(msg.payload ?? '')
    })
    try {
      await client.connect()
      await roundTrip(client, `listen ${client.escapeIdentifier(opts.channel)}`)
    } catch (err) {
      client.removeAllListeners('end')
      await client.end().catch(() => {})
      throw err
    }
    if (this.closed) {
      await client.end().catch(() => {})
      return
    }
    opts.onReset()
    this.client = client
    this.lastOkAt = performance.now()
    this.reconnectDelay = 100
  }

  private scheduleReconnect (): void {
    if (this.closed) return
    const delay = this.reconnectDelay
    this.reconnectDelay = Math.min(this.reconnectDelay * 2, 10_000)
    setTimeout(() => {
      if (this.closed || this.client !== undefined) return
      this.connect().catch(() => this.scheduleReconnect())
    }, delay).unref()
  }
}
