/**
 * An owner whose process is paused (SIGSTOP, as a long GC stall or a frozen VM would pause it) for
 * longer than the fencing bound, then resumed, with real processes. Two cases:
 *
 * - PostgreSQL keeps the paused node's lock session: the node's kernel still acknowledges every
 *   packet and keepalive probe, so the server sees nothing wrong. Nobody can take the node's
 *   partitions over; after the resume it carries on as their owner.
 * - PostgreSQL ends the session while the node is paused (here pg_terminate_backend; a database
 *   restart or an operator does the same). The other node takes the reaktors over during the
 *   pause. Resumed, the node must not start a run of a reaktor it no longer owns: its timers are
 *   all overdue at once, and they must not act on what it knew before the pause.
 *
 * Runs the paused node had in flight when it froze are frozen with it; they end (or are aborted)
 * at the resume, and the test lists them apart: what it checks is which runs START where.
 */
import t from 'tap'
import { readFile } from 'node:fs/promises'
import type { TestContext } from '../helpers/test-context.js'
import { bound, deadline, waitFor } from '../helpers/timing.js'
import { createTestDatabase } from '../helpers/database.js'
import { ALL_REAKTORS, BUSY, Cluster, firstRuns, ms, overlappingRuns, some, watchLocksKept, type LedgerRun, type NodeProcess } from '../helpers/cluster.js'

/** docs/cluster.md: a statement unanswered for 5 s fences the node, about 6 s after it last answered; the pause is longer than that. */
const PAUSE_MS = 9000
/** docs/cluster.md: a free partition is taken at the next pass (every second), paced then runs at its stored nextRun (up to its 3 s interval). */
const TAKEOVER_MS = bound(1000 + 3000, 'seconds')

/** The process state letter of /proc/<pid>/stat ('T': stopped). */
async function processState (pid: number): Promise<string> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8')
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3)
}

async function pause (node: NodeProcess): Promise<number> {
  node.child.kill('SIGSTOP')
  await waitFor(async () => await processState(node.child.pid!) === 'T', { timeoutMs: deadline(5000), intervalMs: 5, what: `${node.nodeId} to stop` })
  return Date.now()
}

async function resume (node: NodeProcess): Promise<number> {
  const at = Date.now()
  node.child.kill('SIGCONT')
  await waitFor(async () => await processState(node.child.pid!) !== 'T', { timeoutMs: deadline(5000), intervalMs: 5, what: `${node.nodeId} to resume` })
  return at
}

/** Two nodes, the reaktors spread over both, node-a running some busy ones: what node-a owns. */
async function spreadCluster (t: TestContext): Promise<{ cluster: Cluster, victims: string[] }> {
  const cluster = new Cluster(t, await createTestDatabase(t))
  await Promise.all([cluster.start('node-a'), cluster.start('node-b')])
  const running = ALL_REAKTORS.filter((id) => id !== 'manual')
  // Settled: the same spread in two reads in a row (the nodes hand partitions over while they even out).
  let previous = ''
  const holders = await waitFor(async () => {
    const h = await cluster.lockHolders()
    const a = [...h].filter(([, n]) => n === 'node-a').map(([id]) => id)
    const key = JSON.stringify([...h].sort())
    const stable = key === previous
    previous = key
    return stable && h.size === running.length && a.length >= 1 && a.length < running.length && a.some((id) => BUSY.includes(id)) ? h : undefined
  }, { timeoutMs: deadline(15_000), intervalMs: 200, what: 'the reaktors spread over both nodes' })
  const victims = [...holders].filter(([, n]) => n === 'node-a').map(([id]) => id).sort()
  await waitFor(async () => (await cluster.ledger("node_id = 'node-a' and reaktor_id = any($1) and started_at > now() - interval '300 ms'",
    [victims.filter((id) => BUSY.includes(id))])).length > 0, { timeoutMs: deadline(10_000), intervalMs: 50, what: 'node-a to run its busy reaktors' })
  return { cluster, victims }
}

/**
 * What node-a owns once it is paused, read then (it can change nothing after that): a handover that
 * completed between the spread and the pause is not taken for a lost lock.
 */
async function ownedWhenPaused (cluster: Cluster): Promise<string[]> {
  const owned = [...await cluster.lockHolders()].filter(([, n]) => n === 'node-a').map(([id]) => id).sort()
  if (owned.length === 0) throw new Error('node-a owned nothing when it was paused')
  return owned
}

/** Overlaps, apart from those of runs node-a had in flight when it froze (started before the pause). */
async function overlapsApartFromFrozen (cluster: Cluster, pausedAt: number): Promise<{ overlaps: string[], frozen: LedgerRun[] }> {
  const runs = new Map((await cluster.ledger()).map((r) => [r.run_id, r]))
  const frozen = (r: LedgerRun | undefined): boolean => r !== undefined && r.node_id === 'node-a' && ms(r.started_at) < pausedAt && (r.ended_at === null || ms(r.ended_at) > pausedAt)
  const overlaps: string[] = []
  const frozenRuns = new Map<string, LedgerRun>()
  for (const o of await overlappingRuns(cluster)) {
    const a = runs.get(o.a)
    const b = runs.get(o.b)
    const f = [a, b].filter(frozen)
    if (f.length > 0) for (const r of f) frozenRuns.set(r!.run_id, r!)
    else overlaps.push(`${o.reaktor_id}: ${o.a}@${a?.node_id ?? '?'} / ${o.b}@${b?.node_id ?? '?'}`)
  }
  return { overlaps, frozen: [...frozenRuns.values()] }
}

t.test('paused past the fencing bound, PostgreSQL keeps its session: nobody takes over, and it carries on as the owner', async (t) => {
  const { cluster } = await spreadCluster(t)
  const nodeA = cluster.node('node-a')
  const lockPid = (await cluster.lockConnectionPid('node-a'))!
  const pausedAt = await pause(nodeA)
  const victims = await ownedWhenPaused(cluster)
  t.comment(`node-a paused; it owned ${victims.join(', ')}`)

  const { lost, checks } = await watchLocksKept(cluster, 'node-a', victims, pausedAt, pausedAt + PAUSE_MS, 'the pause')
  t.same(lost, [], `for ${PAUSE_MS} ms the paused node's session kept every lock of node-a (${checks} checks)`)
  t.equal(await cluster.lockConnectionPid('node-a'), lockPid, 'PostgreSQL kept the session of the paused node')
  t.same((await cluster.ledger('reaktor_id = any($1) and started_at > $2', [victims, new Date(pausedAt)])).map((r) => `${r.reaktor_id}@${r.node_id}`), [],
    "no run of node-a's reaktors started anywhere during the pause")

  const resumedAt = await resume(nodeA)
  const again = await waitFor(async () => {
    const first = firstRuns(await cluster.ledger("node_id = 'node-a' and reaktor_id = any($1) and started_at > $2", [victims, new Date(resumedAt)]))
    return first.size === victims.length ? first : undefined
  }, { timeoutMs: deadline(15_000), intervalMs: 50, what: 'node-a to run its reaktors again' })
  t.ok([...again.values()].every((r) => r.lock_held), `node-a ran ${victims.join(', ')} again, holding their locks`)
  const after = await cluster.ledger('started_at > $1', [new Date(resumedAt)])
  t.same(after.filter((r) => !r.lock_held).map((r) => `${r.reaktor_id}@${r.node_id}`), [], `every run after the resume started under its lock (${after.length} runs)`)
  const fenced = /all runs aborted \(fencing\)/.test(nodeA.output())
  t.comment(`after the resume node-a ${fenced ? 'fenced itself (a statement timer ran out before its answer was read) and reconnected' : 'carried on without fencing'}`)

  for (const nodeId of ['node-a', 'node-b']) t.equal(await cluster.stop(nodeId), 0, `${nodeId} stopped`)
  const { overlaps, frozen } = await overlapsApartFromFrozen(cluster, pausedAt)
  t.same(overlaps, [], 'no two runs of one reaktor overlap')
  t.same(frozen, [], 'not even with a run frozen in the pause: nobody else ran its reaktor')
  t.comment(`measured: ${JSON.stringify({ pauseMs: resumedAt - pausedAt, firstRunAfterResumeMs: Math.min(...[...again.values()].map((r) => ms(r.started_at) - resumedAt)), fenced })}`)
})

t.test('paused past the fencing bound, its session ended meanwhile: the other node takes over, the resumed node starts nothing it no longer owns', async (t) => {
  const { cluster } = await spreadCluster(t)
  const nodeA = cluster.node('node-a')
  const lockPid = (await cluster.lockConnectionPid('node-a'))!
  const logOffset = nodeA.output().length
  const pausedAt = await pause(nodeA)
  const victims = await ownedWhenPaused(cluster)
  t.comment(`node-a paused; it owned ${victims.join(', ')}`)

  const { rows: [terminated] } = await cluster.sql.query<{ ok: boolean }>('select pg_terminate_backend($1) as ok', [lockPid])
  const terminatedAt = Date.now()
  t.ok(terminated.ok, "node-a's lock session terminated while node-a is paused")
  const taken = await waitFor(async () => {
    const first = firstRuns(await cluster.ledger("node_id = 'node-b' and reaktor_id = any($1) and started_at > $2", [victims, new Date(terminatedAt)]))
    return first.size === victims.length ? first : undefined
  }, { timeoutMs: TAKEOVER_MS, intervalMs: 50, what: "node-b to run node-a's reaktors" })
  const takeoverMs = Math.max(...[...taken.values()].map((r) => ms(r.started_at) - terminatedAt))
  t.ok([...taken.values()].every((r) => r.lock_held), `node-b took ${victims.join(', ')} over ${takeoverMs} ms after the session ended, holding their locks`)
  await waitFor(() => Date.now() - pausedAt >= PAUSE_MS, { timeoutMs: PAUSE_MS + deadline(5000), intervalMs: 100, what: 'the pause' })

  const resumedAt = await resume(nodeA)
  const fencedAt = await waitFor(() => /all runs aborted \(fencing\)/.test(nodeA.output().slice(logOffset)) ? Date.now() : undefined,
    { timeoutMs: deadline(10_000), intervalMs: 20, what: 'node-a to notice its lost session' })
  await waitFor(() => /lock connection re-established/.test(nodeA.output().slice(logOffset)), { timeoutMs: deadline(15_000), intervalMs: 50, what: 'node-a to reconnect' })
  // Rejoined, node-a gets its share back (handed over between runs) and runs under its locks.
  const back = await waitFor(async () => some(await cluster.ledger("node_id = 'node-a' and started_at > $1 and lock_held", [new Date(resumedAt)])),
    { timeoutMs: deadline(15_000), intervalMs: 100, what: 'node-a to run again under its locks' })

  const resumedRuns = await cluster.ledger("node_id = 'node-a' and started_at > $1", [new Date(pausedAt)])
  t.same(resumedRuns.filter((r) => !r.lock_held).map((r) => `${r.reaktor_id} ${ms(r.started_at) - resumedAt} ms after the resume`), [],
    `node-a started no run without holding its lock after the resume (${resumedRuns.length} runs, the first ${ms(back[0].started_at) - resumedAt} ms after the resume)`)
  t.same(resumedRuns.filter((r) => victims.includes(r.reaktor_id) && ms(r.started_at) < fencedAt).map((r) => r.reaktor_id), [],
    `none of its former reaktors started on node-a between the resume and its fencing ${fencedAt - resumedAt} ms later (as the test saw it)`)

  for (const nodeId of ['node-a', 'node-b']) t.equal(await cluster.stop(nodeId), 0, `${nodeId} stopped`)
  const { overlaps, frozen } = await overlapsApartFromFrozen(cluster, pausedAt)
  t.same(overlaps, [], `no two runs of one reaktor overlap, apart from runs frozen in flight by the pause (${frozen.length})`)
  for (const r of frozen) t.comment(`frozen in flight: ${r.reaktor_id} started ${pausedAt - ms(r.started_at)} ms before the pause, ended ${ms(r.ended_at) - resumedAt} ms after the resume: ${String(r.outcome)}`)
  t.comment(`measured: ${JSON.stringify({ pauseMs: resumedAt - pausedAt, takeoverAfterTerminateMs: takeoverMs, fencedAfterResumeMs: fencedAt - resumedAt, firstOwnedRunAfterResumeMs: ms(back[0].started_at) - resumedAt })}`)
})
