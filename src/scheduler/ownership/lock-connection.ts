import type pg from 'pg'
import { performance } from 'node:perf_hooks'
import { dedicatedClient, roundTrip } from '../../db/dedicated-connection.js'
import { PARTITION_CHANNEL } from './partition-store.js'
import { CLUSTER_LOCK_NAMESPACE, LEAVING_KEY, MEMBERSHIP_KEY, PARTITION_LOCK_NAMESPACE, PARTITIONED_PROTOCOL_KEY } from './keys.js'

export { CLUSTER_LOCK_NAMESPACE, PARTITION_LOCK_NAMESPACE, REAKTOR_LOCK_NAMESPACE } from './keys.js'

export class LockConnectionLost extends Error {
  readonly code = 'REAKTOR_LOCK_CONNECTION_LOST'
  constructor (cause?: unknown) {
    super('the scheduler lock connection is gone', { cause })
    this.name = 'LockConnectionLost'
  }
}

/**
 * PostgreSQL refused a lock for lack of room in its shared lock table (SQLSTATE 53200
 * `out of shared memory`, hint max_locks_per_transaction). The
 * connection itself is fine and keeps every lock it held.
 */
export class LockRefused extends Error {
  readonly code = 'REAKTOR_LOCK_REFUSED'
  constructor (cause: unknown) {
    super(`PostgreSQL refused an advisory lock: ${(cause as Error)?.message ?? String(cause)}`, { cause })
    this.name = 'LockRefused'
  }
}

/** SQLSTATE 53200 out_of_shared_memory: what PostgreSQL answers when its lock table is full. */
export function isResourceRefusal (err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '53200'
}

export interface LockConnectionOptions {
  url: string
  applicationName: string
  /**
   * A lock query unanswered this long means the connection is dead (network cut): it is dropped.
   * The dead-connection rule of src/db/dedicated-connection.ts (5 s by default).
   */
  queryTimeoutMs: number
  /** Called once per connection, as soon as it breaks (error, end, failed query). */
  onLost: (err: unknown) => void
  /** Channels LISTENed to on each connection: named by the scheduler, whose notifications they carry. */
  channels: readonly string[]
  onNotification: (channel: string, payload: string) => void
}

/**
 * The scheduler's ONE dedicated connection (never a pooled one): session advisory locks live and
 * die with it, and it LISTENs for state changes. When it breaks, every lock it held is gone at
 * once, so the scheduler must stop all runs (fencing) before it reconnects.
 */
export class LockConnection {
  private client: pg.Client | undefined
  private pingInFlight: Promise<boolean> | undefined
  alive = false
  /** Backend pid (pg_locks.pid), for logs and tests. */
  pid: number | undefined
  /** performance.now() of the last successful round trip. */
  lastOkAt = 0

  constructor (private readonly opts: LockConnectionOptions) {}

  async connect (): Promise<void> {
    const client = dedicatedClient(this.opts.url, this.opts.applicationName)
    // Without these listeners a terminated backend would crash the process.
    client.on('error', (err) => this.lost(client, err))
    client.on('end', () => this.lost(client, new Error('connection ended')))
    client.on('notification', (msg) => {
      if (client === this.client && this.alive && msg.payload !== undefined) this.opts.onNotification(msg.channel, msg.payload)
    })
    try {
      await client.connect()
    } catch (err) {
      client.removeAllListeners('end')
      await client.end().catch(() => {})
      throw err
    }
    this.client = client
    this.alive = true
    // Whatever was queued on the previous connection failed with it; start a fresh line.
    this.chain = Promise.resolve()
    const { rows } = await this.query<{ pid: number }>('select pg_backend_pid() as pid')
    this.pid = rows[0].pid
    // The server side of the lease. After a network cut PostgreSQL keeps this session (and its
    // locks) until TCP tells it the peer is gone; these bound that to >= 10 s idle + 3 x 5 s probes
    // (25 s of silence; unacknowledged NOTIFY data likewise). The node, pinging every second, has
    // fenced itself long before: its statements time out after queryTimeoutMs (5 s by default).
    // A fenced node thus never runs while another node can already hold its locks. (Ignored on
    // Unix sockets; through a pooler these apply to the pooler's server connection.)
    await this.query(`select set_config('tcp_keepalives_idle', '10', false), set_config('tcp_keepalives_interval', '5', false),
      set_config('tcp_keepalives_count', '3', false), set_config('tcp_user_timeout', '25000', false)`)
    await this.query(this.opts.channels.map((channel) => `listen ${channel}`).join('; '))
  }

  private lost (client: pg.Client, err: unknown): void {
    if (client !== this.client || !this.alive) return
    this.alive = false
    this.opts.onLost(err)
    client.end().catch(() => {})
  }

  /** Statements run one after the other (pg deprecates queueing on a busy client). */
  private chain: Promise<unknown> = Promise.resolve()

  async query<R extends pg.QueryResultRow = any>(text: string, values: unknown[] = [], opts: { refusable?: boolean } = {}): Promise<pg.QueryResult<R>> {
    const next = this.chain.then(async () => await this.send<R>(text, values, opts.refusable === true))
    this.chain = next.catch(() => {})
    return await next
  }

  private async send<R extends pg.QueryResultRow>(text: string, values: unknown[], refusable: boolean): Promise<pg.QueryResult<R>> {
    const client = this.client
    if (client === undefined || !this.alive) throw new LockConnectionLost()
    try {
      const result = await roundTrip<R>(client, text, values, this.opts.queryTimeoutMs)
      this.lastOkAt = performance.now()
      return result
    } catch (err) {
      // A full lock table, when taking partition locks, is an answer, not a broken session: the
      // locks held stay held. (Anywhere else, any failure means the session cannot be trusted.)
      if (refusable && isResourceRefusal(err) && client === this.client && this.alive) throw new LockRefused(err)
      // Any other failure of these few, simple statements means we can no longer trust the session
      // (a statement error would be a bug; a timeout or a broken socket is a lost connection).
      this.lost(client, err)
      throw new LockConnectionLost(err)
    }
  }

  /** A cheap round trip; concurrent callers share one. False (and the connection is dropped) on failure. */
  async ping (): Promise<boolean> {
    this.pingInFlight ??= this.query('select 1').then(() => true, () => false).finally(() => { this.pingInFlight = undefined })
    return await this.pingInFlight
  }

  /**
   * Tries each partition once; returns the partitions now held. Callers never pass one already
   * held. Throws LockRefused when PostgreSQL's lock table is full: the locks taken by that
   * statement before it failed stay held (session locks ignore the rollback), so the caller
   * re-reads what it holds with heldPartitions().
   */
  async tryLocks (partitions: readonly number[]): Promise<Set<number>> {
    if (partitions.length === 0) return new Set()
    const { rows } = await this.query<{ key: number, ok: boolean }>(
      'select k as key, pg_try_advisory_lock($1::int4, k) as ok from unnest($2::int4[]) as k',
      [PARTITION_LOCK_NAMESPACE, partitions],
      { refusable: true }
    )
    return new Set(rows.filter((r) => r.ok).map((r) => Number(r.key)))
  }

  /** The partitions this session holds, from pg_locks (after a refused statement). */
  async heldPartitions (): Promise<Set<number>> {
    const { rows } = await this.query<{ key: number }>(
      `select objid::bigint::int as key from pg_locks where pid = pg_backend_pid() and locktype = 'advisory'
         and classid = $1::bigint::oid and objsubid = 2 and granted`,
      [PARTITION_LOCK_NAMESPACE]
    )
    return new Set(rows.map((r) => Number(r.key)))
  }

  /** Releases partitions held once each; returns those the session did not hold (a bookkeeping bug). */
  async unlock (partitions: readonly number[]): Promise<number[]> {
    if (partitions.length === 0) return []
    const { rows } = await this.query<{ key: number, ok: boolean }>(
      'select k as key, pg_advisory_unlock($1::int4, k) as ok from unnest($2::int4[]) as k',
      [PARTITION_LOCK_NAMESPACE, partitions]
    )
    return rows.filter((r) => !r.ok).map((r) => Number(r.key))
  }

  /** Cold-start probe: succeeds only when no live node holds the membership lock. */
  async tryExclusiveMembership (): Promise<boolean> {
    const { rows } = await this.query<{ ok: boolean }>('select pg_try_advisory_lock($1::int4, $2::int4) as ok', [CLUSTER_LOCK_NAMESPACE, MEMBERSHIP_KEY])
    return rows[0].ok
  }

  /**
   * Marks this session as a node that owns by partition, before it touches the membership lock
   * (exclusive or shared): a membership holder without this mark is a node of the previous version.
   */
  async holdProtocol (): Promise<void> {
    await this.query('select pg_advisory_lock_shared($1::int4, $2::int4)', [CLUSTER_LOCK_NAMESPACE, PARTITIONED_PROTOCOL_KEY])
  }

  /** Joins the cluster: held shared for the life of the connection. Never blocks on other members. */
  async holdSharedMembership (): Promise<void> {
    // Blocks only while a cold-starting node applies the restart rules under the exclusive lock.
    await this.query('select pg_advisory_lock_shared($1::int4, $2::int4)', [CLUSTER_LOCK_NAMESPACE, MEMBERSHIP_KEY])
  }

  async releaseExclusiveMembership (): Promise<void> {
    await this.query('select pg_advisory_unlock($1::int4, $2::int4)', [CLUSTER_LOCK_NAMESPACE, MEMBERSHIP_KEY])
  }

  /** Releases every lock and closes the connection (the end of a session releases them anyway). */
  async close (): Promise<void> {
    const client = this.client
    if (client === undefined) return
    const wasAlive = this.alive
    this.alive = false
    this.client = undefined
    if (wasAlive) await client.query('select pg_advisory_unlock_all()').catch(() => {})
    await client.end().catch(() => {})
  }

  /** A shutdown keeps some partitions past its grace: the other nodes no longer count this one when sharing out. */
  async markLeaving (): Promise<void> {
    await this.query('select pg_advisory_lock_shared($1::int4, $2::int4)', [CLUSTER_LOCK_NAMESPACE, LEAVING_KEY])
  }

  /**
   * The end of a shutdown that kept some partitions locked past its grace: releases them, tells
   * the other nodes (on this connection: the pool may be closed by now), and closes.
   */
  async releaseAndClose (partitions: readonly number[]): Promise<void> {
    if (this.alive) {
      await this.unlock(partitions).catch(() => {})
      await this.query('select pg_notify($1, $2)', [PARTITION_CHANNEL, String(partitions.length)]).catch(() => {})
    }
    await this.close()
  }

  /** Gives up on a connection that is up but could not be set up: the same as losing it (fencing). */
  drop (err: unknown): void {
    if (this.client !== undefined) this.lost(this.client, err)
  }

  /** Drops the connection without unlocking (crash simulation). */
  destroy (): void {
    const client = this.client
    this.alive = false
    this.client = undefined
    client?.end().catch(() => {})
  }
}
