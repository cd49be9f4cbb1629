/**
 * Run history and the status fields end to end: real runs of a real service (no rows written by
 * the test) that return true, false, throw, time out and then settle, or are stopped mid-run; what
 * `GET /runs` and the status show for each, run now adding a run, and a bulk stop.
 */
import t, { type Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { ADMIN_ENV, loggedIn, type ApiCall } from '../helpers/auth.js'
import { build } from '../helpers/app.js'
import { deferred } from '../helpers/deferred.js'
import { deadline, waitFor } from '../helpers/timing.js'
import { FAST_SCHEDULER, probe, untilAborted, type RunTrace } from '../helpers/scheduler.js'

/**
 * A run's durationMs is measured by the scheduler's clock around the aktor call, which the probe's
 * own readings lie within: at least the probe's span, and more only by the scheduler's bookkeeping
 * around the call: a few statements of its own, no time promised, so a generous limit.
 */
const BOOKKEEPING_MS = deadline(1000)

interface Seen { runs: any[], nextBefore: string | null }

async function runs (call: ApiCall, id: string): Promise<Seen> {
  const res = await call('GET', `/api/v1/polling/${id}/runs?limit=500`)
  if (res.statusCode !== 200) throw new Error(`GET runs of ${id}: ${res.statusCode} ${JSON.stringify(res.body)}`)
  return res.body
}

/** Polls the history until `ok` holds for its runs. */
async function runsUntil (call: ApiCall, id: string, ok: (runs: any[]) => boolean, what: string): Promise<any[]> {
  return await waitFor(async () => { const { runs: r } = await runs(call, id); return ok(r) ? r : undefined }, { what, timeoutMs: deadline(10_000) })
}

async function status (call: ApiCall, id: string): Promise<any> {
  const res = await call('GET', `/api/v1/polling/${id}/status`)
  if (res.statusCode !== 200) throw new Error(`GET status of ${id}: ${res.statusCode} ${JSON.stringify(res.body)}`)
  return res.body
}

async function statusUntil (call: ApiCall, id: string, ok: (s: any) => boolean, what: string): Promise<any> {
  return await waitFor(async () => { const s = await status(call, id); return ok(s) ? s : undefined }, { what, timeoutMs: deadline(10_000) })
}

/** The fields every run of the history must show for a run the probe saw (outcome and error checked by the caller). */
function checkRun (t: Test, app: FastifyInstance, shown: any, trace: RunTrace, id: string): void {
  t.same(Object.keys(shown).sort(), ['durationMs', 'error', 'node', 'outcome', 'reaktorDefinitionId', 'runId', 'startedAt'], `${id} run ${trace.n}: exactly the documented fields`)
  t.equal(shown.runId, trace.runId, `${id} run ${trace.n}: runId is the one the aktor saw in context.runId`)
  t.equal(shown.reaktorDefinitionId, id)
  t.equal(shown.node, app.config.nodeId, 'node is the NODE_ID that ran it')
  t.equal(shown.startedAt, new Date(trace.lastRun).toISOString(), `${id} run ${trace.n}: startedAt is when the aktor was called`)
  if (trace.end !== undefined && shown.durationMs !== null) {
    const span = trace.end - trace.start
    t.ok(Number.isInteger(shown.durationMs) && shown.durationMs >= span && shown.durationMs <= span + BOOKKEEPING_MS,
      `${id} run ${trace.n}: durationMs ${shown.durationMs as number} covers the aktor's ${span} ms`)
  }
}

t.test('real runs: every outcome in the history with every field, the status fields, run now and a bulk stop', async (t) => {
  const work = probe('e2e-work', (n) => n === 1, { interval: '1h', autoStart: true })
  const fail = probe('e2e-fail', (n) => { if (n === 1) throw new Error('boom'); return false }, { interval: '1h', autoStart: true })
  const settle = deferred<boolean>()
  const slow = probe('e2e-slow', async (n) => n === 1 ? await settle.promise : false, { interval: '1h', autoStart: true, timeout: '100ms' })
  const halted = probe('e2e-halted', async (_n, ctx) => await untilAborted(ctx.signal), { interval: '1h', autoStart: true })
  const app = await build(t, {
    env: ADMIN_ENV,
    scheduler: FAST_SCHEDULER,
    apps: [{ name: 'e2e-app', version: '1.0.0', pollingReaktors: [work, fail, slow, halted].map((p) => p.registration) }]
  })
  const call = await loggedIn(app)

  // true, then false: two runs at once (a true result runs again without waiting), newest first.
  let shown = await runsUntil(call, 'e2e-work', (r) => r.length === 2, 'the two runs of e2e-work')
  t.same(shown.map((r) => r.outcome), ['no_work', 'more_work'], 'newest first: the false run, then the true one')
  checkRun(t, app, shown[0], work.runs[1], 'e2e-work')
  checkRun(t, app, shown[1], work.runs[0], 'e2e-work')
  t.same(shown.map((r) => r.error), [null, null], 'no error for a success')
  t.ok(Date.parse(shown[0].startedAt) >= Date.parse(shown[1].startedAt) + shown[1].durationMs, 'the second started after the first ended')
  let s = await statusUntil(call, 'e2e-work', (x) => x.lastOutcome === 'no_work', 'the status of e2e-work after its second run')
  t.match(s, { lastSuccessAt: shown[0].startedAt, lastFailureAt: null, lastError: null, lastDurationMs: shown[0].durationMs, runningSince: null })

  // A throw: failed, with the error, in the history and the status.
  shown = await runsUntil(call, 'e2e-fail', (r) => r.length === 1, 'the failed run of e2e-fail')
  checkRun(t, app, shown[0], fail.runs[0], 'e2e-fail')
  t.match(shown[0], { outcome: 'failed', error: /boom/ })
  s = await statusUntil(call, 'e2e-fail', (x) => x.lastOutcome === 'failed', 'the failure in the status of e2e-fail')
  t.match(s, { lastFailureAt: shown[0].startedAt, lastSuccessAt: null, lastError: shown[0].error, lastDurationMs: shown[0].durationMs, consecutiveFailures: 1 })

  // Run now: one more run, a success, which keeps the last failure's time and message.
  t.same(await call('POST', '/api/v1/polling/e2e-fail/run'), { statusCode: 202, body: { message: 'Polling reaktor "e2e-fail": run requested' } })
  shown = await runsUntil(call, 'e2e-fail', (r) => r.length === 2, 'the requested run of e2e-fail')
  t.same(shown.map((r) => r.outcome), ['no_work', 'failed'])
  checkRun(t, app, shown[0], fail.runs[1], 'e2e-fail')
  t.equal(shown[0].error, null)
  const failure = shown[1]
  s = await statusUntil(call, 'e2e-fail', (x) => x.lastOutcome === 'no_work', 'the requested run in the status of e2e-fail')
  t.match(s, { lastSuccessAt: shown[0].startedAt, lastFailureAt: failure.startedAt, lastError: failure.error, lastDurationMs: shown[0].durationMs, consecutiveFailures: 0 },
    'a success keeps lastFailureAt and lastError')

  // A timeout: recorded when it fires (no duration yet, blocked), completed when the run settles.
  shown = await runsUntil(call, 'e2e-slow', (r) => r.length === 1, 'the timed-out run of e2e-slow')
  checkRun(t, app, shown[0], slow.runs[0], 'e2e-slow')
  t.match(shown[0], { outcome: 'timed_out', durationMs: null, error: /timed out after 100 ms/ })
  s = await statusUntil(call, 'e2e-slow', (x) => x.blocked === true, 'e2e-slow blocked')
  t.match(s, { lastOutcome: 'timed_out', lastFailureAt: shown[0].startedAt, lastSuccessAt: null, lastError: /timed out/, runningSince: shown[0].startedAt },
    'still in flight after its timeout: runningSince is its start')
  t.equal(slow.runs[0].end, undefined, 'the aktor is still running')
  settle.resolve(true)
  shown = await runsUntil(call, 'e2e-slow', (r) => r[0]?.durationMs !== null, 'the settled run\'s duration')
  t.equal(shown.length, 1, 'the settled run completes its row, no second row')
  checkRun(t, app, shown[0], slow.runs[0], 'e2e-slow')
  t.ok(shown[0].durationMs >= 100, `it ran past its 100 ms timeout (${shown[0].durationMs as number} ms)`)
  t.match(shown[0], { outcome: 'timed_out', error: /timed out/ }, 'still timed out: its late result does not count')
  s = await statusUntil(call, 'e2e-slow', (x) => x.blocked === false && x.runningSince === null, 'e2e-slow settled in the status')
  t.match(s, { lastOutcome: 'timed_out', lastDurationMs: shown[0].durationMs, lastSuccessAt: null })

  // Stopped mid-run: runningSince while in flight, then an aborted run with its reason, and null.
  await waitFor(() => halted.runs.length === 1, { what: 'the run of e2e-halted in flight' })
  const startedAt = new Date(halted.runs[0].lastRun).toISOString()
  s = await statusUntil(call, 'e2e-halted', (x) => x.runningSince !== null, 'runningSince of e2e-halted')
  t.match(s, { runningSince: startedAt, lastOutcome: null, lastDurationMs: null, state: 'running' })
  t.same((await runs(call, 'e2e-halted')).runs, [], 'a run in flight is not in the history yet')
  t.equal((await call('POST', '/api/v1/polling/e2e-halted/stop')).statusCode, 200)
  shown = await runsUntil(call, 'e2e-halted', (r) => r.length === 1, 'the aborted run of e2e-halted')
  checkRun(t, app, shown[0], halted.runs[0], 'e2e-halted')
  t.match(shown[0], { outcome: 'aborted', error: /aborted/ })
  t.ok(Number.isInteger(shown[0].durationMs), 'an aborted run has its duration')
  s = await statusUntil(call, 'e2e-halted', (x) => x.runningSince === null, 'runningSince of e2e-halted cleared')
  t.match(s, { state: 'stopped', lastOutcome: null, lastDurationMs: null }, 'a discarded result is in the history only')

  // Run now on a running reaktor adds a run; on the stopped one it is refused and adds none.
  t.equal((await call('POST', '/api/v1/polling/e2e-work/run')).statusCode, 202)
  shown = await runsUntil(call, 'e2e-work', (r) => r.length === 3, 'the requested run of e2e-work')
  t.same(shown.map((r) => r.outcome), ['no_work', 'no_work', 'more_work'])
  checkRun(t, app, shown[0], work.runs[2], 'e2e-work')
  t.equal((await call('POST', '/api/v1/polling/e2e-halted/run')).statusCode, 409)

  // Bulk stop by app: every reaktor of it stopped, as the status of each says at once.
  const bulk = await call('POST', '/api/v1/polling/stop', { app: 'e2e-app' })
  t.equal(bulk.statusCode, 200)
  t.same(bulk.body.results, [
    { reaktorDefinitionId: 'e2e-fail', result: 'stopped' },
    { reaktorDefinitionId: 'e2e-halted', result: 'already_stopped' },
    { reaktorDefinitionId: 'e2e-slow', result: 'stopped' },
    { reaktorDefinitionId: 'e2e-work', result: 'stopped' }
  ])
  for (const id of ['e2e-work', 'e2e-fail', 'e2e-slow', 'e2e-halted']) {
    t.match(await status(call, id), { state: 'stopped', nextRun: null }, `${id} stopped`)
  }
  const list = (await call('GET', '/api/v1/polling')).body.pollingReaktors
  t.same(list.map((x: any) => x.state), ['stopped', 'stopped', 'stopped', 'stopped'], 'the list says so too')
})
