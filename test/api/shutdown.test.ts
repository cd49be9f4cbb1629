import http from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { ADMIN_ENV, loginToken, tokenHeader } from '../helpers/auth.js'
import { build } from '../helpers/app.js'
import { deadline, waitFor } from '../helpers/timing.js'
import { FAST_SCHEDULER, probe, work } from '../helpers/scheduler.js'

t.test('close: the scheduler stops at once, not after the HTTP drain; no run starts once close began', async (t) => {
  // Runs back to back (a drain): during a slow HTTP drain it would start run after run. Once the
  // slow request is in flight, a run lasts until aborted (at most 10 s), so close always meets one.
  let callStarted = false
  let longRun: number | undefined
  const drain = probe('drain', async (n, ctx) => {
    if (callStarted) longRun ??= n
    await work(callStarted ? 10_000 : 5, ctx.signal)
    return true
  }, { interval: '1h', autoStart: true })
  // The slow request answers when the test lets it: the drain provably lasts past the abort.
  let release = (): void => {}
  const released = new Promise<void>((resolve) => { release = resolve })
  const app = await build(t, {
    env: ADMIN_ENV,
    scheduler: FAST_SCHEDULER,
    apps: [{
      name: 'shutdown-test',
      version: '1.0.0',
      pollingReaktors: [drain.registration],
      reaktors: [{ reaktorDefinitionId: 'slow-call', createReaktor: () => async () => { callStarted = true; await released; return { done: true } } }]
    }]
  })
  const token = await loginToken(app)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  await waitFor(() => drain.runs.length >= 3, { what: 'the drain to run' })

  // No keep-alive (agent: false): the server's close then waits for this request only.
  let answered = false
  const call = new Promise<{ status: number, body: string }>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/api/v1/aktor/slow-call', method: 'POST', agent: false, headers: { ...tokenHeader(token), 'content-type': 'application/json' } }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => { body += chunk })
      res.on('end', () => { answered = true; resolve({ status: res.statusCode ?? 0, body }) })
    })
    req.on('error', reject)
    req.end('{}')
  })
  await waitFor(() => longRun !== undefined, { what: 'a run in flight while the slow request is' })
  const inFlight = drain.runs[longRun! - 1]
  const runsAtClose = drain.runs.length
  t.equal(runsAtClose, longRun, 'the long run is the latest')
  const closing = app.close()
  await waitFor(() => inFlight.end !== undefined, { timeoutMs: deadline(5000), what: 'the in-flight run to end while HTTP drains' })
  t.ok(inFlight.context.signal.aborted, 'the in-flight run was aborted at once, through its signal')
  t.notOk(answered, 'while the HTTP request was still in flight')
  release()
  const res = await call
  t.equal(res.status, 200, 'the in-flight request still completes (HTTP drains)')
  t.same(JSON.parse(res.body), { done: true })
  await closing
  t.equal(drain.runs.length, runsAtClose, 'no run started after close began')
})
