import http from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { ADMIN_ENV, loginToken } from './auth-helper.js'
import { build, waitFor } from './helper.js'
import { probe, work } from './scheduler-helper.js'

t.test('close: the scheduler stops at once, not after the HTTP drain; no run starts once close began', async (t) => {
  // Runs back to back (a drain): during a slow HTTP drain it would start run after run.
  const drain = probe('drain', async (_n, ctx) => { await work(5, ctx.signal); return true }, { interval: '1h', autoStart: true })
  let callStarted = false
  const app = await build(t, {
    env: ADMIN_ENV,
    scheduler: { minIntervalMs: 50, reconcileIntervalMs: 200, flushIntervalMs: 50 },
    apps: [{
      name: 'shutdown-test',
      version: '1.0.0',
      pollingReaktors: [drain.registration],
      reaktors: [{ reaktorDefinitionId: 'slow-call', createReaktor: () => async () => { callStarted = true; await work(1500); return { done: true } } }]
    }]
  })
  const token = await loginToken(app)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  await waitFor(() => drain.runs.length >= 3, { what: 'the drain to run' })

  // No keep-alive (agent: false): the server's close then waits for this request only.
  const call = new Promise<{ status: number, body: string }>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/api/v1/aktor/slow-call', method: 'POST', agent: false, headers: { 'x-service-token': token, 'content-type': 'application/json' } }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => { body += chunk })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
    })
    req.on('error', reject)
    req.end('{}')
  })
  await waitFor(() => callStarted, { what: 'the slow request to be in flight' })
  const runsAtClose = drain.runs.length
  const closing = app.close()
  const res = await call
  const answeredAt = Date.now()
  t.equal(res.status, 200, 'the in-flight request still completes (HTTP drains)')
  t.same(JSON.parse(res.body), { done: true })
  await closing
  // The run in flight at close may be the one launched in that very turn; nothing after it.
  t.ok(drain.runs.length <= runsAtClose + 1, `no run started after close began (${drain.runs.length - runsAtClose} more)`)
  const last = drain.runs[drain.runs.length - 1]
  t.ok(last.end !== undefined && last.end < answeredAt, 'the in-flight run was aborted at once, long before the drain ended')
  t.ok(last.context.signal.aborted, 'through its signal')
})
