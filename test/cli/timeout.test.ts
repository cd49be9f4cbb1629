/**
 * REAKTOR_TIMEOUT: a service that accepts the connection but never answers (a stalled node, a hung
 * proxy) fails the command after the timeout, exit 1, instead of holding a script for minutes.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { performance } from 'node:perf_hooks'
import t from 'tap'
import { cliHome, runCli } from '../helpers/cli.js'
import { deadline } from '../helpers/timing.js'

t.test('no answer within REAKTOR_TIMEOUT: exit 1 saying so; a bad REAKTOR_TIMEOUT: exit 2', async (t) => {
  let asked = 0
  // Takes every request and never answers it.
  const server = http.createServer(() => { asked++ })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.closeAllConnections(); server.close() })
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const env = { XDG_CONFIG_HOME: await cliHome(t), REAKTOR_URL: base, REAKTOR_TOKEN: 'reaktor_pat_' + 'x'.repeat(43) }

  const started = performance.now()
  // runCli kills the command after 30 s: without a timeout of its own it would end there, code null.
  const hung = await runCli(['polling', 'list'], { env: { ...env, REAKTOR_TIMEOUT: '1s' } })
  const took = performance.now() - started
  t.equal(hung.code, 1, hung.stderr)
  t.equal(hung.stderr, `reaktor: no answer from ${base} within 1000ms (REAKTOR_TIMEOUT): GET /api/v1/polling\n`)
  t.equal(hung.stdout, '')
  t.equal(asked, 1, 'the request reached the service')
  // 1 s, plus the command's own start (a few seconds on two busy cores): far below the HTTP client's 300 s.
  t.ok(took < deadline(15_000), `ended after ${Math.round(took)} ms`)

  const bad = await Promise.all(['soon', '0s', '0'].map(async (value) => await runCli(['whoami'], { env: { ...env, REAKTOR_TIMEOUT: value } })))
  for (const res of bad) {
    t.equal(res.code, 2, res.stderr)
    t.match(res.stderr, /^reaktor: REAKTOR_TIMEOUT must be a duration such as 30s/)
  }
  t.equal(asked, 1, 'nothing asked with a bad timeout')
})
