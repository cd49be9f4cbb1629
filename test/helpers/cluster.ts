/**
 * Multi-process harness for the cluster tests: real `node --import tsx src/server.ts` processes on
 * one database, with the ledger app of test/fixtures/cluster-app (every run of its reaktors is a
 * row of `cluster_ledger`). Local addresses only; every process is killed at teardown.
 */
import type { ChildProcess } from 'node:child_process'
import pg from 'pg'
import { PARTITION_LOCK_NAMESPACE } from '../../src/scheduler/index.js'
import { survivesLostConnections } from '../../src/db/index.js'
import { ADMIN, ADMIN_ENV, tokenHeader } from './auth.js'
import { tempDir } from './temp-dir.js'
import type { TestContext } from './test-context.js'
import { deadline, waitFor } from './timing.js'
import { CLUSTER_APPS_DIR, ROOT } from './paths.js'
import { listeningUrl, startServer } from './server.js'

export const BUSY = ['busy-1', 'busy-2', 'busy-3', 'busy-4', 'busy-5', 'busy-6']
/** Every polling reaktor of the ledger app; `manual` is the only one without autoStart. */
export const ALL_REAKTORS = [...BUSY, 'manual', 'paced']

export interface NodeProcess {
  nodeId: string
  child: ChildProcess
  /** http://127.0.0.1:PORT, from the "Server listening at" log line. */
  url: string
  output: () => string
  exited: Promise<number | null>
  /** Date.now() at spawn. */
  startedAt: number
  /** Date.now() right before SIGKILL was sent (the process was dead within milliseconds). */
  killedAt?: number
  /** Date.now() when the test saw the process exit: nothing of it runs after this. */
  exitedAt?: number
}

export interface StatusBody {
  reaktorDefinitionId: string
  state: 'running' | 'stopped'
  owner: string | null
  lastRun: string | null
  nextRun: string | null
}

export interface LedgerRun {
  run_id: string
  reaktor_id: string
  node_id: string
  started_at: Date
  ended_at: Date | null
  outcome: string | null
  lock_held: boolean
}

/** A ledger time in epoch ms (NaN for the end of a run that has none). */
export function ms (d: Date | null): number {
  return d === null ? Number.NaN : d.getTime()
}

/** The rows, or undefined while there are none (for waitFor). */
export function some<T> (rows: T[]): T[] | undefined {
  return rows.length > 0 ? rows : undefined
}

/** The first run of each reaktor in ledger rows (ordered by start, as `Cluster.ledger` returns them). */
export function firstRuns (runs: LedgerRun[]): Map<string, LedgerRun> {
  const first = new Map<string, LedgerRun>()
  for (const r of runs) if (!first.has(r.reaktor_id)) first.set(r.reaktor_id, r)
  return first
}

export class Cluster {
  readonly nodes = new Map<string, NodeProcess>()
  /** Every process ever started (killed ones included), for the overlap analysis. */
  readonly history: NodeProcess[] = []
  readonly sql: pg.Pool
  private token: string | undefined

  constructor (private readonly t: TestContext, readonly databaseUrl: string, private readonly env: Record<string, string> = {}) {
    this.sql = new pg.Pool({ connectionString: databaseUrl, max: 3, application_name: 'cluster-test' })
    survivesLostConnections(this.sql)
    t.teardown(async () => {
      for (const node of this.history) if (node.child.exitCode === null && node.child.signalCode === null) node.child.kill('SIGKILL')
      await Promise.all(this.history.map(async (n) => await n.exited))
      await this.sql.end()
    })
  }

  /**
   * Spawns one node and waits until it listens (and so has joined the cluster: onReady ran).
   * `netns`: the node runs inside that network namespace (`ip netns exec`, which execs it: the
   * pid is the node's own); its HTTP port is then reachable only from inside.
   */
  async start (nodeId: string, extraEnv: Record<string, string> = {}, { netns }: { netns?: string } = {}): Promise<NodeProcess> {
    const dataDir = await tempDir(this.t, 'reaktor-cluster-node-')
    const server = startServer({
      ...ADMIN_ENV,
      DATABASE_URL: this.databaseUrl,
      HOST: '127.0.0.1',
      NODE_ID: nodeId,
      DATA_DIR: dataDir,
      REAKTOR_APPS_DIR: CLUSTER_APPS_DIR,
      REAKTOR_SETTING_CLUSTER_LEDGER_LEDGERURL: this.databaseUrl,
      SHUTDOWN_GRACE: '5s',
      ...this.env,
      ...extraEnv
    }, ROOT, netns === undefined ? [] : ['ip', 'netns', 'exec', netns])
    // Set within the exit event, before anything awaiting `exited` resumes.
    server.child.on('exit', () => { node.exitedAt = Date.now() })
    const node: NodeProcess = { nodeId, ...server, url: '', startedAt: Date.now() }
    this.history.push(node)
    node.url = await listeningUrl(server, `node ${nodeId}`)
    this.nodes.set(nodeId, node)
    return node
  }

  /** SIGKILL: no shutdown hook runs, the lock connection just dies with the process. */
  async kill9 (nodeId: string): Promise<number> {
    const node = this.node(nodeId)
    node.killedAt = Date.now()
    node.child.kill('SIGKILL')
    this.nodes.delete(nodeId)
    await node.exited
    return node.killedAt
  }

  /** SIGTERM: graceful shutdown; resolves with the exit code. */
  async stop (nodeId: string): Promise<number | null> {
    const node = this.node(nodeId)
    node.child.kill('SIGTERM')
    this.nodes.delete(nodeId)
    return await node.exited
  }

  node (nodeId: string): NodeProcess {
    const node = this.nodes.get(nodeId)
    if (node === undefined) throw new Error(`no live node ${nodeId}`)
    return node
  }

  /** An API request through one node; `payload` is sent as JSON. */
  async api (nodeId: string, method: 'GET' | 'POST', url: string, payload?: unknown): Promise<{ status: number, body: any }> {
    const node = this.node(nodeId)
    this.token ??= await this.login(node)
    const json = payload === undefined ? {} : { headers: { ...tokenHeader(this.token), 'content-type': 'application/json' }, body: JSON.stringify(payload) }
    const res = await fetch(`${node.url}/api/v1${url}`, { method, headers: tokenHeader(this.token), ...json })
    return { status: res.status, body: await res.json() }
  }

  private async login (node: NodeProcess): Promise<string> {
    const res = await fetch(`${node.url}/api/v1/auth/login`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN)
    })
    if (res.status !== 200) throw new Error(`login failed: ${res.status}`)
    return (await res.json() as { token: string }).token
  }

  /** GET /api/v1/polling through one node, by id. */
  async statuses (nodeId: string): Promise<Map<string, StatusBody>> {
    const { body } = await this.api(nodeId, 'GET', '/polling')
    return new Map((body.pollingReaktors as StatusBody[]).map((s) => [s.reaktorDefinitionId, s]))
  }

  /**
   * Who holds each running reaktor's partition lock right now, from pg_locks (node id from the
   * lock connection's application name `reaktor-scheduler <NODE_ID>`).
   */
  async lockHolders (ids: readonly string[] = ALL_REAKTORS): Promise<Map<string, string>> {
    const { rows } = await this.sql.query<{ reaktor_id: string, node: string }>(`
      select p.reaktor_id, substr(a.application_name, length('reaktor-scheduler ') + 1) as node
      from polling_reaktors as p
      join pg_locks as l on l.locktype = 'advisory' and l.granted and l.objsubid = 2
        and l.database = (select oid from pg_database where datname = current_database())
        and l.classid = ${PARTITION_LOCK_NAMESPACE}::bigint::oid and l.objid = p.partition::bigint::oid
      join pg_stat_activity as a on a.pid = l.pid
      where p.reaktor_id = any($1::text[]) and p.state = 'running'`, [ids])
    return new Map(rows.map((r) => [r.reaktor_id, r.node]))
  }

  /** Running reaktors per node (by lock holder). */
  async spread (): Promise<Record<string, number>> {
    const counts: Record<string, number> = Object.fromEntries([...this.nodes.keys()].map((n) => [n, 0]))
    for (const node of (await this.lockHolders()).values()) counts[node] = (counts[node] ?? 0) + 1
    return counts
  }

  /** Backend pid of a node's scheduler lock connection. */
  async lockConnectionPid (nodeId: string): Promise<number | undefined> {
    const { rows } = await this.sql.query<{ pid: number }>(
      `select pid from pg_stat_activity where datname = current_database() and application_name = left('reaktor-scheduler ' || $1, 63)`, [nodeId])
    return rows[0]?.pid
  }

  /** The ledger's runs; none before the first run of any node has created its table. */
  async ledger (where = 'true', values: unknown[] = []): Promise<LedgerRun[]> {
    try {
      const { rows } = await this.sql.query<LedgerRun>(`select * from cluster_ledger where ${where} order by started_at`, values)
      return rows
    } catch (err) {
      // 42P01 undefined_table: the fixture app creates it lazily, on its first run.
      if ((err as { code?: unknown }).code === '42P01') return []
      throw err
    }
  }

  /** The process a ledger run ran in: of its node id, alive when the run started. */
  processOf (run: LedgerRun): NodeProcess | undefined {
    const at = ms(run.started_at)
    return this.history.filter((n) => n.nodeId === run.node_id && n.startedAt <= at && (n.exitedAt === undefined || at <= n.exitedAt))
      .sort((x, y) => y.startedAt - x.startedAt)[0]
  }

  /** When each process ended (a node id may be killed or stopped, restarted, killed again). */
  exits (): Array<{ nodeId: string, at: number }> {
    return this.history.filter((n) => n.exitedAt !== undefined).map((n) => ({ nodeId: n.nodeId, at: n.exitedAt! }))
  }
}

/**
 * Watches, until `until` (epoch ms), that `nodeId` keeps the partition lock of each of `ids`
 * (4 checks a second). Returns every moment it did not, and how many checks there were.
 */
export async function watchLocksKept (cluster: Cluster, nodeId: string, ids: readonly string[], since: number, until: number, what: string): Promise<{ lost: string[], checks: number }> {
  let checks = 0
  const lost: string[] = []
  await waitFor(async () => {
    const holders = await cluster.lockHolders()
    checks++
    const gone = ids.filter((id) => holders.get(id) !== nodeId)
    if (gone.length > 0) lost.push(`${Date.now() - since} ms: ${gone.join(', ')}`)
    return Date.now() >= until
  }, { timeoutMs: until - Date.now() + deadline(5000), intervalMs: 250, what })
  return { lost, checks }
}

/** One overlap of two runs of a reaktor, with what the ledger knows of both (for the failure message). */
export interface Overlap {
  a: string
  b: string
  reaktor_id: string
  /** `node started..ended outcome` of each run; `ended` is the end the check used (see overlappingRuns). */
  a_run: string
  b_run: string
}

/**
 * Overlaps in the ledger: pairs of runs of one reaktor whose [start, end) intersect. A run left
 * without a recorded end (its process was killed, or exited before the background write landed)
 * ends when its process ended: the process of that node id that was alive when the run started.
 * A process killed with SIGKILL ended when the signal was sent (`killedAt`), not when the test saw
 * it exit: that can come hundreds of ms later on busy cores, long after another node took the dead
 * node's partitions over, which the dead node's session held until the process was gone; another
 * process ended when the test saw it exit. Any other run without an end counts as never ending.
 */
export async function overlappingRuns (cluster: Cluster): Promise<Overlap[]> {
  const processes = cluster.history.filter((n) => n.exitedAt !== undefined)
  const { rows } = await cluster.sql.query<Overlap>(`
    with processes as (
      select * from unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[]) as p(node_id, started_ms, exited_ms, ended_ms)
    ), runs as (
      select r.run_id, r.reaktor_id, r.node_id, r.started_at, r.outcome, r.ended_at is null as end_inferred,
             coalesce(r.ended_at,
                      (select greatest(r.started_at, to_timestamp(p.ended_ms / 1000.0)) from processes as p
                       where p.node_id = r.node_id and to_timestamp(p.started_ms / 1000.0) <= r.started_at
                         and r.started_at <= to_timestamp(p.exited_ms / 1000.0)
                       order by p.started_ms desc limit 1),
                      'infinity'::timestamptz) as ended_at
      from cluster_ledger as r
    ), described as (
      select *, format('%s %s..%s%s %s', node_id, to_char(started_at at time zone 'UTC', 'HH24:MI:SS.MS'),
                       to_char(ended_at at time zone 'UTC', 'HH24:MI:SS.MS'), case when end_inferred then ' (process end)' else '' end,
                       coalesce(outcome, '-')) as run
      from runs
    )
    select x.run_id as a, y.run_id as b, x.reaktor_id, x.run as a_run, y.run as b_run
    from described as x join described as y on x.reaktor_id = y.reaktor_id and x.run_id < y.run_id
    where tstzrange(x.started_at, x.ended_at, '[)') && tstzrange(y.started_at, y.ended_at, '[)')`,
  [processes.map((p) => p.nodeId), processes.map((p) => p.startedAt), processes.map((p) => p.exitedAt), processes.map((p) => p.killedAt ?? p.exitedAt)])
  return rows
}
