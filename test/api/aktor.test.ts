import http from 'node:http'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import type { AktorContext, ReaktorRegistration } from '../../src/sdk/types.js'
import { build } from '../helpers/app.js'
import { sessionToken, tokenHeader } from '../helpers/auth.js'
import type { TestContext } from '../helpers/test-context.js'
import { deadline, waitFor } from '../helpers/timing.js'
import { FAST_SCHEDULER, probe } from '../helpers/scheduler.js'

interface Probe { contexts: AktorContext[], params: unknown[], aborted: string[] }

function reaktors (probe: Probe): ReaktorRegistration[] {
  return [
    {
      reaktorDefinitionId: 'echo',
      createReaktor: (params) => {
        probe.params.push(params)
        return async (input, context) => {
          probe.contexts.push(context)
          return { input, greeting: context.settings.greeting }
        }
      }
    },
    { reaktorDefinitionId: 'nothing', createReaktor: () => async () => undefined },
    { reaktorDefinitionId: 'text', createReaktor: () => async () => 'plain string' },
    { reaktorDefinitionId: 'sync', createReaktor: () => (input: number) => input * 2 },
    {
      reaktorDefinitionId: 'typed',
      inputSchema: {
        type: 'object',
        properties: { name: { type: 'string', minLength: 1 }, count: { type: 'integer' }, email: { type: 'string', format: 'email' } },
        required: ['name'],
        additionalProperties: false
      },
      createReaktor: () => async (input: { name: string }) => ({ hello: input.name })
    },
    {
      reaktorDefinitionId: 'crash',
      createReaktor: () => async () => { throw new Error('database password is hunter2') }
    },
    {
      reaktorDefinitionId: 'crash-sync',
      createReaktor: () => () => { throw new TypeError('secret internals') }
    },
    {
      reaktorDefinitionId: 'teapot',
      createReaktor: () => async () => { throw Object.assign(new Error('no coffee here'), { statusCode: 418 }) }
    },
    {
      reaktorDefinitionId: 'not-found-inside',
      createReaktor: () => async () => { throw Object.assign(new Error('order 7 does not exist'), { statusCode: 404 }) }
    },
    {
      reaktorDefinitionId: 'bad-gateway',
      createReaktor: () => async () => { throw Object.assign(new Error('upstream at 10.0.0.7 said no'), { statusCode: 502 }) }
    },
    {
      reaktorDefinitionId: 'slow',
      timeout: '200ms',
      createReaktor: () => async (_input, context) => await new Promise((resolve, reject) => {
        context.signal.addEventListener('abort', () => { probe.aborted.push(`slow:${String(context.signal.reason?.message)}`); reject(context.signal.reason) })
      })
    },
    {
      reaktorDefinitionId: 'deaf',
      timeout: '150ms',
      // Ignores its signal entirely; the answer is still cut at the timeout.
      createReaktor: () => async () => await new Promise((resolve) => setTimeout(() => resolve('too late'), 1000))
    },
    {
      reaktorDefinitionId: 'waits-for-client',
      timeout: '30s',
      createReaktor: () => async (_input, context) => await new Promise((resolve, reject) => {
        probe.contexts.push(context)
        context.signal.addEventListener('abort', () => { probe.aborted.push('waits-for-client'); reject(context.signal.reason) })
      })
    }
  ]
}

async function setup (t: TestContext, env: Record<string, string> = {}): Promise<{ app: FastifyInstance, token: string, probe: Probe }> {
  const probe: Probe = { contexts: [], params: [], aborted: [] }
  const app = await build(t, { apps: [{ name: 'aktors', version: '1.0.0', settings: { greeting: 'hi' }, reaktors: reaktors(probe) }], env })
  return { app, token: await sessionToken(app), probe }
}

type Response = Awaited<ReturnType<FastifyInstance['inject']>>

/** POST with a raw body text (undefined: no body at all). */
async function callRaw (app: FastifyInstance, name: string, token: string | undefined, body?: string, headers: Record<string, string> = {}): Promise<Response> {
  return await app.inject({
    method: 'POST',
    url: `/api/v1/aktor/${name}`,
    headers: { ...tokenHeader(token), ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { payload: body })
  })
}

/** POST with `input` as the JSON body. */
async function call (app: FastifyInstance, name: string, token: string | undefined, input?: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return await callRaw(app, name, token, input === undefined ? undefined : JSON.stringify(input), headers)
}

/** The status of a normal call: 200 while the service is healthy. */
async function healthy (app: FastifyInstance, token: string): Promise<number> {
  return (await call(app, 'echo', token, { still: 'alive' })).statusCode
}

t.test('runs the aktor with the JSON body and a context, answers its output', async (t) => {
  const { app, token, probe } = await setup(t)
  const res = await call(app, 'echo', token, { a: 1, nested: [true, null] })
  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /^application\/json/)
  t.same(res.json(), { input: { a: 1, nested: [true, null] }, greeting: 'hi' })
  t.same(probe.params, [{ settings: { greeting: 'hi' } }], 'createReaktor got the app settings')
  const [context] = probe.contexts
  t.equal(context.reaktorId, 'echo')
  t.equal(typeof context.runId, 'string')
  t.ok(context.runId.length > 0)
  t.same(context.settings, { greeting: 'hi' })
  t.type(context.log.info, 'function')
  t.equal(context.signal.aborted, false, 'not aborted after a normal answer')

  for (const value of [42, 'text', null, [1, 2], true]) {
    const r = await call(app, 'echo', token, value)
    t.equal(r.statusCode, 200, `a bare JSON ${JSON.stringify(value)} is a valid input`)
    t.same(r.json().input, value)
  }
  t.equal((await call(app, 'sync', token, 21)).body, '42', 'a synchronous aktor')
  const nothing = await call(app, 'nothing', token, {})
  t.equal(nothing.statusCode, 200)
  t.equal(nothing.body, 'null', 'undefined is answered as null')
  const text = await call(app, 'text', token, {})
  t.equal(text.body, '"plain string"', 'a string output is JSON too')
  t.match(text.headers['content-type'], /^application\/json/)
  const noBody = await call(app, 'echo', token)
  t.equal(noBody.statusCode, 200, 'no body at all: the input is undefined')
  t.same(noBody.json(), { greeting: 'hi' })
})

t.test('authentication, unknown aktors and bad bodies', async (t) => {
  const { app, token } = await setup(t)
  const missing = await call(app, 'echo', undefined, {})
  t.equal(missing.statusCode, 401)
  t.same(Object.keys(missing.json()).sort(), ['error', 'message', 'statusCode'])
  t.equal((await call(app, 'echo', 'x'.repeat(43), {})).statusCode, 401, 'unknown token')
  t.equal((await call(app, 'echo', undefined, {}, { cookie: `reaktor_session=${token}` })).statusCode, 401, 'the API never accepts the cookie')

  const unknown = await call(app, 'no-such-aktor', token, {})
  t.equal(unknown.statusCode, 404)
  t.match(unknown.json(), { statusCode: 404, error: 'Not Found', message: /no-such-aktor/ })

  const malformed = await callRaw(app, 'echo', token, '{"a": ')
  t.equal(malformed.statusCode, 400)
  t.match(malformed.json(), { statusCode: 400, error: 'Bad Request' })
  t.equal((await callRaw(app, 'echo', token, '{"__proto__": {"x": 1}}')).statusCode, 400, 'prototype poisoning')
  t.equal((await callRaw(app, 'echo', token, 'hello', { 'content-type': 'text/plain' })).statusCode, 415, 'JSON only')
  t.equal(await healthy(app, token), 200, 'the service still answers afterwards')
})

t.test('body over the limit → 413 (limit configurable)', async (t) => {
  const { app, token } = await setup(t, { AKTOR_BODY_LIMIT: '1000' })
  t.equal((await call(app, 'echo', token, { s: 'x'.repeat(900) })).statusCode, 200)
  const big = await call(app, 'echo', token, { s: 'x'.repeat(1000) })
  t.equal(big.statusCode, 413)
  t.match(big.json(), { statusCode: 413, error: 'Payload Too Large' })
  t.equal(await healthy(app, token), 200, 'the service still answers afterwards')

  const defaults = await setup(t)
  t.equal((await call(defaults.app, 'echo', defaults.token, { s: 'x'.repeat(1024 * 1024) })).statusCode, 413, 'default 1 MiB')
  t.equal((await call(defaults.app, 'echo', defaults.token, { s: 'x'.repeat(1000 * 1000) })).statusCode, 200)
})

t.test('an input schema on the registration → 400 with the validation message', async (t) => {
  const { app, token } = await setup(t)
  t.same((await call(app, 'typed', token, { name: 'Ada' })).json(), { hello: 'Ada' })
  const cases: Array<[unknown, RegExp]> = [
    [{}, /must have required property 'name'/],
    [{ name: 5 }, /body\/name must be string/],
    [{ name: 'Ada', count: '3' }, /body\/count must be integer/],
    [{ name: 'Ada', extra: true }, /must NOT have additional properties/],
    [{ name: 'Ada', email: 'not-an-email' }, /must match format "email"/],
    ['Ada', /body must be object/]
  ]
  for (const [input, message] of cases) {
    const res = await call(app, 'typed', token, input)
    t.equal(res.statusCode, 400, JSON.stringify(input))
    t.match(res.json(), { statusCode: 400, error: 'Bad Request', message })
  }
  t.equal((await call(app, 'typed', token)).statusCode, 400, 'a missing body fails the schema')
})

t.test('a broken input schema stops the start naming the reaktor', async (t) => {
  await t.rejects(build(t, {
    apps: [{ name: 'broken', version: '1.0.0', reaktors: [{ reaktorDefinitionId: 'bad-schema', inputSchema: { type: 'no-such-type' }, createReaktor: () => async () => 1 }] }]
  }), /bad-schema.*inputSchema/)
})

t.test('aktor failures: 500 without internals, 4xx kept, the service stays healthy', async (t) => {
  const { app, token } = await setup(t)
  for (const name of ['crash', 'crash-sync', 'bad-gateway']) {
    const res = await call(app, name, token, {})
    t.equal(res.statusCode, 500, name)
    t.same(res.json(), { statusCode: 500, error: 'Internal Server Error', message: 'Internal Server Error' }, `${name}: nothing internal leaks`)
    t.notMatch(res.body, /hunter2|secret|10\.0\.0\.7/)
  }
  const teapot = await call(app, 'teapot', token, {})
  t.equal(teapot.statusCode, 418)
  t.same(teapot.json(), { statusCode: 418, error: "I'm a Teapot", message: 'no coffee here' })
  const notFound = await call(app, 'not-found-inside', token, {})
  t.same(notFound.json(), { statusCode: 404, error: 'Not Found', message: 'order 7 does not exist' })
  t.equal(await healthy(app, token), 200, 'the service still answers afterwards')
})

t.test('timeout → 504, the aktor\'s signal is aborted', async (t) => {
  const { app, token, probe } = await setup(t)
  const started = Date.now()
  const slow = await call(app, 'slow', token, {})
  t.equal(slow.statusCode, 504)
  t.match(slow.json(), { statusCode: 504, error: 'Gateway Timeout', message: 'Aktor "slow" did not answer within 200ms' })
  t.match(probe.aborted, [/^slow:Aktor "slow" did not answer/], 'the signal carries the timeout')
  t.ok(Date.now() - started < deadline(5000))

  const deaf = await call(app, 'deaf', token, {})
  t.equal(deaf.statusCode, 504, 'an aktor that ignores its signal is still cut off')
  t.equal(await healthy(app, token), 200, 'the service still answers afterwards')
})

t.test('the client going away aborts the aktor\'s signal', async (t) => {
  const { app, token, probe } = await setup(t)
  const origin = await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = new URL(origin)
  const req = http.request({ host: '127.0.0.1', port, path: '/api/v1/aktor/waits-for-client', method: 'POST', headers: { ...tokenHeader(token), 'content-type': 'application/json' } })
  req.on('error', () => {})
  req.end('{}')
  await waitFor(() => probe.contexts.length === 1, { what: 'the aktor to start' })
  t.equal(probe.contexts[0].signal.aborted, false)
  req.destroy()
  await waitFor(() => probe.aborted.includes('waits-for-client'), { what: 'the signal to abort' })
  t.equal(probe.contexts[0].signal.aborted, true)

  // Over a real socket too, a failure is a 500 (not mistaken for a client that left).
  const crash = await fetch(`${origin}/api/v1/aktor/crash`, { method: 'POST', headers: { ...tokenHeader(token), 'content-type': 'application/json' }, body: '{}' })
  t.equal(crash.status, 500)
  const ok = await fetch(`${origin}/api/v1/aktor/echo`, { method: 'POST', headers: { ...tokenHeader(token), 'content-type': 'application/json' }, body: '{"x":1}' })
  t.same(await ok.json(), { input: { x: 1 }, greeting: 'hi' })
  t.equal(await healthy(app, token), 200, 'the service still answers afterwards')
})

t.test('an aktor cannot change the app settings at any depth; the next call and the next polling run see the originals', async (t) => {
  const given = { nested: { a: 'original', deeper: { list: [1, { b: 2 }] } }, tags: ['x', 'z'] }
  const tampering = async (_input: unknown, { settings }: AktorContext): Promise<unknown> => {
    const seen = JSON.parse(JSON.stringify(settings)) as unknown
    const s = settings as any
    const attempts: Record<string, () => unknown> = {
      'nested.a': () => { s.nested.a = 'changed' },
      'nested.added': () => { s.nested.added = true },
      'delete nested.deeper': () => delete s.nested.deeper,
      'nested.deeper.list[1].b': () => { s.nested.deeper.list[1].b = 3 },
      'nested.deeper.list.push': () => s.nested.deeper.list.push(9),
      'tags[0]': () => { s.tags[0] = 'y' },
      'tags.reverse': () => s.tags.reverse()
    }
    const refused: string[] = []
    // ES modules run in strict mode: a write to a frozen object throws there.
    for (const [name, attempt] of Object.entries(attempts)) {
      try { attempt() } catch (err) { if (err instanceof TypeError) refused.push(name) }
    }
    return { seen, refused }
  }
  const runs: unknown[] = []
  const polling = probe('tamper-poll', async (_n, context) => { runs.push(await tampering(undefined, context)); return false }, { interval: '50ms', autoStart: true })
  const app = await build(t, {
    apps: [{ name: 'tamper', version: '1.0.0', settings: given, reaktors: [{ reaktorDefinitionId: 'tamper', createReaktor: () => tampering }], pollingReaktors: [polling.registration] }],
    scheduler: FAST_SCHEDULER
  })
  const token = await sessionToken(app)
  const original = { nested: { a: 'original', deeper: { list: [1, { b: 2 }] } }, tags: ['x', 'z'] }
  const everyWrite = ['nested.a', 'nested.added', 'delete nested.deeper', 'nested.deeper.list[1].b', 'nested.deeper.list.push', 'tags[0]', 'tags.reverse']
  for (const n of [1, 2]) {
    const res = await call(app, 'tamper', token, {})
    t.equal(res.statusCode, 200)
    t.same(res.json(), { seen: original, refused: everyWrite }, `call ${n} sees the original settings; every write throws`)
  }
  await waitFor(() => runs.length >= 2, { what: 'two polling runs' })
  for (const [i, run] of runs.slice(0, 2).entries()) t.same(run, { seen: original, refused: everyWrite }, `polling run ${i + 1} sees the original settings; every write throws`)
  given.nested.a = 'changed by its owner'
  t.equal((app.apps.findApp('tamper', '1.0.0')?.settings.nested as any).a, 'original', 'the settings are a copy: the object passed in code stays its owner\'s')
  t.notOk(Object.isFrozen(given.nested), 'and is not frozen')
})
