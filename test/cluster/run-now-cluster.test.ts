/**
 * Run now in a cluster of three real processes (docs/operating.md "Run now"), proven on the run ledger of the
 * test app: requests sent through the nodes that do NOT own the reaktor, several at once while a
 * run is in flight, make its owner run it exactly once more, right after that run, with no overlap;
 * a request during the interval wait runs it at once; and a request made while nobody owns the
 * reaktor (its owner was just killed) is run by the next owner as soon as it takes over, before the
 * next run the dead owner had planned.
 */
import t from 'tap'
import { bound, deadline, waitFor } from '../helpers/timing.js'
import { createTestDatabase } from '../helpers/database.js'
import { ALL_REAKTORS, Cluster, ms, overlappingRuns, some, type LedgerRun } from '../helpers/cluster.js'

/** `manual` works this long per run (its interval is 3 s): time for the requests to land mid-run. */
const WORK_MS = 2000
const INTERVAL_MS = 3000
/**
 * docs/operating.md ("Run now"): a requested run starts right after the run in flight ends, on the next turn of the event
 * loop; measured from the end the aktor wrote to the ledger, which includes that write's round trip.
 */
const RIGHT_AFTER_MS = bound(0, 'turns')
/** docs/operating.md ("Run now"): the owner starts the run within 50 ms of the request (measured from its sending). */
const RUN_STARTS_WITHIN_MS = bound(50, 'request')
/** docs/cluster.md: a takeover about 1 s after a crash (as the cluster test). */
const TAKEOVER_MS = bound(1000, 'takeover')

t.test('run now through non-owners: one extra run right after the run in flight, at once when idle, and after a crash by the next owner', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const cluster = new Cluster(t, databaseUrl, { REAKTOR_SETTING_CLUSTER_LEDGER_MANUALWORKMS: String(WORK_MS) })
  await Promise.all(['node-a', 'node-b', 'node-c'].map(async (n) => await cluster.start(n)))
  t.equal((await cluster.api('node-a', 'POST', '/polling/manual/start')).status, 200)
  // Settled (every running reaktor held, each node its share): no handover moves manual mid-test.
  await waitFor(async () => {
    const counts = Object.values(await cluster.spread())
    return counts.reduce((a, b) => a + b, 0) === ALL_REAKTORS.length && counts.every((c) => c >= 1 && c <= Math.ceil(ALL_REAKTORS.length / 3))
  }, { timeoutMs: deadline(20_000), intervalMs: 200, what: 'the spread over three nodes' })
  const figures: Record<string, unknown> = {}
  const manualRuns = async (where = 'true', values: unknown[] = []): Promise<LedgerRun[]> =>
    await cluster.ledger(`reaktor_id = 'manual' and ${where}`, values)

  await t.test('six requests through the two non-owners while a run is in flight: exactly one extra run, right after it', async (t) => {
    const inFlight = await waitFor(async () => (await manualRuns("ended_at is null and started_at > now() - interval '300 ms'"))[0],
      { timeoutMs: deadline(15_000), intervalMs: 20, what: 'a run of manual just started' })
    const owner = inFlight.node_id
    const others = [...cluster.nodes.keys()].filter((n) => n !== owner)
    const answers = await Promise.all(Array.from({ length: 6 }, async (_v, i) => await cluster.api(others[i % 2], 'POST', '/polling/manual/run')))
    const answeredAt = Date.now()
    t.same(answers.map((a) => a.status), [202, 202, 202, 202, 202, 202], `all answered 202 by ${others.join(' and ')} (owner ${owner})`)
    t.same(answers[0].body, { message: 'Polling reaktor "manual": run requested' })

    const [ended] = await waitFor(async () => some(await manualRuns('run_id = $1 and ended_at is not null', [inFlight.run_id])),
      { timeoutMs: deadline(10_000), what: 'the run in flight to end' })
    t.ok(ms(ended.ended_at) > answeredAt, 'every request was answered while that run was in flight')
    t.equal(ended.outcome, 'ok', 'the run in flight was not disturbed')
    // The extra run, and the one its interval brings.
    const [extra, next] = await waitFor(async () => {
      const runs = await manualRuns('started_at > $1', [inFlight.started_at])
      return runs.length >= 2 && runs[0].ended_at !== null ? runs : undefined
    }, { timeoutMs: deadline(15_000), intervalMs: 50, what: 'the extra run and the next one' })
    figures.extraAfterEndMs = ms(extra.started_at) - ms(ended.ended_at)
    t.equal(extra.node_id, owner, 'the owner ran it')
    t.ok(ms(extra.started_at) >= ms(ended.ended_at) && ms(extra.started_at) - ms(ended.ended_at) <= RIGHT_AFTER_MS,
      `right after the run in flight ended (${ms(extra.started_at) - ms(ended.ended_at)} ms)`)
    t.ok(ms(next.started_at) - ms(extra.ended_at) >= INTERVAL_MS - 5, `then the interval as usual (${ms(next.started_at) - ms(extra.ended_at)} ms after the extra run ended): six requests, one extra run`)
  })

  await t.test('a request during the interval wait runs it at once', async (t) => {
    // Just ended, its result flushed: the next run is about 3 s away.
    const last = await waitFor(async () => {
      const run = (await manualRuns("ended_at is not null and ended_at > now() - interval '500 ms'")).at(-1)
      return run !== undefined && (await manualRuns('ended_at is null')).length === 0 ? run : undefined
    }, { timeoutMs: deadline(15_000), intervalMs: 20, what: 'a run of manual just ended' })
    const via = [...cluster.nodes.keys()].find((n) => n !== last.node_id)!
    const sent = Date.now()
    const res = await cluster.api(via, 'POST', '/polling/manual/run')
    t.equal(res.status, 202)
    const [run] = await waitFor(async () => some(await manualRuns('started_at > $1', [last.started_at])), { timeoutMs: deadline(5000), intervalMs: 10, what: 'the requested run' })
    figures.idleRequestToStartMs = ms(run.started_at) - sent
    t.ok(ms(run.started_at) - sent <= RUN_STARTS_WITHIN_MS, `${run.node_id} started it ${ms(run.started_at) - sent} ms after the request was sent to ${via}`)
    t.ok(ms(run.started_at) < ms(last.ended_at) + INTERVAL_MS, 'before its interval was up')
  })

  await t.test('a request made while nobody owns the reaktor (its owner killed) is run by the next owner at once', async (t) => {
    // A run just ended and its result is stored: the stored next run is about an interval away.
    const { last, nextRun } = await waitFor(async () => {
      const run = (await manualRuns("ended_at is not null and ended_at > now() - interval '1 s'")).at(-1)
      if (run === undefined || (await manualRuns('ended_at is null')).length > 0) return undefined
      const { rows } = await cluster.sql.query<{ next_run: Date }>("select next_run from polling_reaktors where reaktor_id = 'manual' and last_run_id = $1", [run.run_id])
      return rows.length > 0 && ms(rows[0].next_run) - Date.now() > TAKEOVER_MS + 500 ? { last: run, nextRun: ms(rows[0].next_run) } : undefined
    }, { timeoutMs: deadline(20_000), intervalMs: 20, what: 'a run of manual just ended and stored' })
    const victim = last.node_id
    const killedAt = await cluster.kill9(victim)
    const via = [...cluster.nodes.keys()][0]
    const res = await cluster.api(via, 'POST', '/polling/manual/run')
    t.equal(res.status, 202, `accepted by ${via} while nobody owns manual`)
    const [run] = await waitFor(async () => some(await manualRuns('started_at > $1', [last.started_at])), { timeoutMs: deadline(10_000), intervalMs: 20, what: 'the next run of manual' })
    figures.crashRequestRunAfterKillMs = ms(run.started_at) - killedAt
    figures.crashRequestRunBeforePlannedMs = nextRun - ms(run.started_at)
    t.not(run.node_id, victim, `run by ${run.node_id}, the next owner`)
    t.ok(ms(run.started_at) < nextRun, `${nextRun - ms(run.started_at)} ms before the next run ${victim} had planned`)
    t.ok(ms(run.started_at) - killedAt <= TAKEOVER_MS, `as soon as it took over (${ms(run.started_at) - killedAt} ms after the kill)`)
  })

  t.same(await overlappingRuns(cluster), [], 'no two runs of a reaktor overlapped')
  const withoutLock = await cluster.ledger('not lock_held')
  t.same(withoutLock.map((r) => `${r.reaktor_id}@${r.node_id}`), [], 'every run started on the node holding its partition lock')
  t.comment(`figures: ${JSON.stringify(figures)}`)
})
