/**
 * reaktor-service/testing: one run of a registration, judged as the service judges it, without a
 * service. What an app author's test relies on: the result, the log lines, the failures with the
 * service's messages and statuses, the timeout and the caller's signal.
 */
import t from 'tap'
import { constant, definePollingReaktor, defineReaktor, pipe, setting, type AktorContext } from '../../src/sdk/index.js'
import { ReaktorRunError, runAktor, runPollingReaktor } from '../../src/testing/index.js'
import type * as PublicTesting from 'reaktor-service/testing'
import { deadline } from '../helpers/timing.js'

// What apps import as reaktor-service/testing (tsconfig paths, package.json exports) is this module:
// checked by the type-check, which fails when the name stops resolving or the two drift apart.
export const publicTesting = { ReaktorRunError, runAktor, runPollingReaktor } satisfies typeof PublicTesting

/** An aktor that never answers until its signal aborts; then rejects with the signal's reason. */
const untilAborted = async (_input: unknown, context: AktorContext): Promise<never> => await new Promise<never>((_resolve, reject) => {
  context.signal.addEventListener('abort', () => reject(context.signal.reason), { once: true })
})

t.test('a polling run gives its boolean and the lines it logged, with the context the service gives', async (t) => {
  let seen: AktorContext | undefined
  const poller = definePollingReaktor({
    reaktorDefinitionId: 'greeter-poll',
    interval: '1m',
    createReaktor: () => async (_input, context) => {
      seen = context
      context.log.info({ n: 1 }, `${String(context.settings.greeting)} from the poller`)
      context.log.warn('only a message')
      return true
    }
  })
  const { result, logs, runId } = await runPollingReaktor(poller, { settings: { greeting: 'hi', nested: { a: 1 } } })
  t.equal(result, true)
  t.same(logs.map((l) => [l.level, l.msg, l.data]), [['info', 'hi from the poller', { n: 1 }], ['warn', 'only a message', undefined]])
  t.match(logs[0].bindings, { reaktorId: 'greeter-poll', runId })
  t.match(runId, /^[0-9a-f]{8}-[0-9a-f]{4}-7/, 'a version 7 run id, as the scheduler makes')
  t.equal(seen?.reaktorId, 'greeter-poll')
  t.throws(() => { (seen!.settings.nested as { a: number }).a = 2 }, TypeError, 'settings are read-only at every depth')

  t.equal((await runPollingReaktor(definePollingReaktor({ reaktorDefinitionId: 'idle', interval: '1m', createReaktor: () => constant(false) }))).result, false)
})

t.test('a polling run that does not return a boolean, or throws, fails with the service\'s message', async (t) => {
  const notBoolean = { reaktorDefinitionId: 'wrong', interval: '1m', createReaktor: () => async () => 'yes' } as any
  await t.rejects(runPollingReaktor(notBoolean), { name: 'ReaktorRunError', outcome: 'failed', message: /run returned string; a polling reaktor must return a boolean/ })

  const boom = new Error('boom')
  const failing = definePollingReaktor({
    reaktorDefinitionId: 'failing',
    interval: '1m',
    createReaktor: () => async (_input, context) => { context.log.info({}, 'about to fail'); throw boom }
  })
  const err = await runPollingReaktor(failing).catch((e: unknown) => e) as ReaktorRunError
  t.type(err, ReaktorRunError)
  t.equal(err.message, 'Error: boom')
  t.equal(err.cause, boom, 'the thrown error is the cause')
  t.same(err.logs.map((l) => l.msg), ['about to fail'], 'the lines logged before the failure')

  const missing = definePollingReaktor({ reaktorDefinitionId: 'needs-setting', interval: '1m', createReaktor: () => pipe(setting('absent'), constant(false)) })
  await t.rejects(runPollingReaktor(missing), { message: /setting "absent" is not defined for reaktor "needs-setting"/ })
})

t.test('a registration the service would refuse is refused with the start-up message', async (t) => {
  await t.rejects(runPollingReaktor({ reaktorDefinitionId: 'x', interval: 'soon', createReaktor: () => constant(false) }), /interval "soon" is malformed/)
  await t.rejects(runAktor({ reaktorDefinitionId: 'y' } as any, {}), /reaktor "y" has no createReaktor function/)
  await t.rejects(runAktor(defineReaktor({ reaktorDefinitionId: 'z', timeout: '0s', createReaktor: () => constant(1) }), {}), /timeout "0s" must be greater than zero/)
})

t.test('timeout aborts the signal and fails the run, as the service does', async (t) => {
  const stuck = definePollingReaktor({ reaktorDefinitionId: 'stuck', interval: '1m', timeout: '5m', createReaktor: () => untilAborted })
  const started = Date.now()
  await t.rejects(runPollingReaktor(stuck, { timeout: '50ms' }), { outcome: 'timed_out', message: /RunTimeoutError: run timed out after 50 ms/ })
  t.ok(Date.now() - started < deadline(4000), 'the option overrides the registration\'s 5m')

  const slow = defineReaktor({ reaktorDefinitionId: 'slow', timeout: '50ms', createReaktor: () => untilAborted })
  await t.rejects(runAktor(slow, {}), { outcome: 'timed_out', statusCode: 504, message: 'Aktor "slow" did not answer within 50ms' })
})

t.test('the caller\'s signal interrupts a run, like a stop or a client going away', async (t) => {
  const stuck = definePollingReaktor({ reaktorDefinitionId: 'stoppable', interval: '1m', createReaktor: () => untilAborted })
  const controller = new AbortController()
  const run = runPollingReaktor(stuck, { signal: controller.signal })
  setImmediate(() => controller.abort())
  await t.rejects(run, { outcome: 'aborted', message: /RunStoppedError: run aborted/ })

  const call = defineReaktor({ reaktorDefinitionId: 'callable', createReaktor: () => untilAborted })
  const second = new AbortController()
  const pending = runAktor(call, {}, { signal: second.signal })
  setImmediate(() => second.abort())
  await t.rejects(pending, { name: 'ReaktorRunError', outcome: 'aborted', statusCode: 499 })

  await t.rejects(runAktor(call, {}, { signal: AbortSignal.abort() }), { outcome: 'aborted', message: /before the start/ })
  await t.rejects(runPollingReaktor(stuck, { signal: AbortSignal.abort() }), { name: 'ReaktorRunError', outcome: 'aborted' })
})

t.test('an aktor that ignores its signal: the run is aborted at once all the same, not timed out later', async (t) => {
  const deaf = definePollingReaktor({ reaktorDefinitionId: 'deaf', interval: '1m', timeout: '2s', createReaktor: () => async () => await new Promise<boolean>(() => {}) })
  const controller = new AbortController()
  const started = Date.now()
  const run = runPollingReaktor(deaf, { signal: controller.signal })
  setImmediate(() => controller.abort())
  await t.rejects(run, { outcome: 'aborted', message: 'RunStoppedError: run aborted: the signal given to runPollingReaktor was aborted' })
  t.ok(Date.now() - started < deadline(1500, { below: 2000 }), 'before its timeout')
})

t.test('an aktor gets its input and settings and answers its output; failures carry the HTTP status', async (t) => {
  const hello = defineReaktor<{ name: string }, { message: string }>({
    reaktorDefinitionId: 'hello',
    inputSchema: { type: 'object', properties: { name: { type: 'string' }, punctuation: { type: 'string', default: '!' } }, required: ['name'] },
    createReaktor: ({ settings }) => async (input, context) => {
      context.log.info({ name: input.name }, 'greeting')
      return { message: `${String(settings.greeting)}, ${input.name}${(input as any).punctuation as string}` }
    }
  })
  const { output, logs } = await runAktor(hello, { name: 'Ada' }, { settings: { greeting: 'Hello' } })
  t.same(output, { message: 'Hello, Ada!' }, 'schema defaults are filled in, as by the route')
  t.same(logs.map((l) => [l.msg, l.bindings]), [['greeting', { aktor: 'hello' }]])

  await t.rejects(runAktor(hello, { nom: 'Ada' } as any), { statusCode: 400, message: "body must have required property 'name'" })

  const full = defineReaktor({ reaktorDefinitionId: 'full', createReaktor: () => () => { throw Object.assign(new Error('queue full'), { statusCode: 409 }) } })
  await t.rejects(runAktor(full, {}), { statusCode: 409, message: 'queue full', outcome: 'failed' })
  const broken = defineReaktor({ reaktorDefinitionId: 'broken', createReaktor: () => async () => { throw new TypeError('oops') } })
  await t.rejects(runAktor(broken, {}), { statusCode: 500, message: 'TypeError: oops' })
})

t.test('input and output travel as JSON, as over HTTP', async (t) => {
  let seen: unknown
  const echo = defineReaktor({
    reaktorDefinitionId: 'echo',
    inputSchema: { type: 'object', properties: { n: { type: 'number', default: 1 } } },
    createReaktor: () => async (input: Record<string, unknown>) => {
      seen = input
      return { at: new Date(0), gone: undefined, map: new Map([['a', 1]]), input }
    }
  })
  const given = { when: new Date(0) }
  const { output } = await runAktor(echo, given)
  t.same(given, { when: new Date(0) }, 'the schema\'s default is not written into the caller\'s object')
  t.same(seen, { when: '1970-01-01T00:00:00.000Z', n: 1 }, 'the aktor gets the body as parsed JSON')
  t.same(output, { at: '1970-01-01T00:00:00.000Z', map: {}, input: { when: '1970-01-01T00:00:00.000Z', n: 1 } })
  t.notOk(Object.hasOwn(output as object, 'gone'))

  t.equal((await runAktor(defineReaktor({ reaktorDefinitionId: 'nothing', createReaktor: () => () => undefined }), {})).output, null, 'no output is null')
  const big = defineReaktor({ reaktorDefinitionId: 'big', createReaktor: () => () => ({ n: 1n }) })
  await t.rejects(runAktor(big, {}), { name: 'ReaktorRunError', statusCode: 500, outcome: 'failed', message: /^TypeError: .*BigInt/ })
})

t.test('the log lines are pino\'s: placeholders, an Error alone, every level', async (t) => {
  const boom = new Error('boom')
  const chatty = defineReaktor({
    reaktorDefinitionId: 'chatty',
    createReaktor: () => async (_input, context) => {
      context.log.info('hello %s, %d times', 'Ada', 3)
      context.log.error(boom)
      context.log.warn({ err: boom, n: 1 }, 'with %s', 'context')
      context.log.trace('finest')
      context.log.fatal('last')
      return null
    }
  })
  const { logs } = await runAktor(chatty, {})
  t.same(logs.map((l) => [l.level, l.msg]), [['info', 'hello Ada, 3 times'], ['error', 'boom'], ['warn', 'with context'], ['trace', 'finest'], ['fatal', 'last']])
  t.match(logs[1].data, { err: { type: 'Error', message: 'boom', stack: /Error: boom/ } })
  t.match(logs[2].data, { n: 1, err: { message: 'boom' } })
  t.equal(logs[0].data, undefined)
  t.same(logs[0].bindings, { aktor: 'chatty' })
})

t.test('a missing registration is said to be missing; registration errors name the app given', async (t) => {
  await t.rejects(runPollingReaktor(undefined as any), { name: 'TypeError', message: /^runPollingReaktor: the registration is undefined \(not found\?/ })
  await t.rejects(runAktor([].find(() => true) as any, {}), { message: /^runAktor: the registration is undefined/ })
  await t.rejects(runPollingReaktor({ reaktorDefinitionId: 'x', interval: 'soon', createReaktor: () => constant(false) }, { app: { name: 'my-app', version: '0.1.0' } }), /^app my-app@0\.1\.0: .*interval "soon" is malformed/)
})
