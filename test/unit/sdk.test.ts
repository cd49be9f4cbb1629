import t from 'tap'
import { branch, constant, MissingSettingError, parallel, pipe, setting, type Aktor, type AktorContext } from '../../src/sdk/index.js'
import { deferred } from '../helpers/deferred.js'
import { silentLogger } from '../helpers/log.js'

const log = silentLogger

function contextWith (overrides: Partial<AktorContext> = {}): AktorContext {
  return { signal: new AbortController().signal, log, settings: {}, reaktorId: 'sdk-test', runId: 'run-1', ...overrides }
}

/** An aktor that stays pending until its signal aborts, then rejects with the signal's reason. */
function untilAborted (seen: AbortSignal[]): Aktor<unknown, never> {
  return async (_input, context) => await new Promise<never>((_resolve, reject) => {
    seen.push(context.signal)
    if (context.signal.aborted) reject(context.signal.reason)
    context.signal.addEventListener('abort', () => reject(context.signal.reason), { once: true })
  })
}

t.test('constant returns its value whatever the input', async (t) => {
  const ctx = contextWith()
  t.equal(await constant(42)('ignored', ctx), 42)
  t.same(await constant({ a: 1 })(undefined, ctx), { a: 1 })
  t.equal(await constant(false)(undefined, ctx), false)
})

t.test('branch runs the then-aktor on a truthy predicate and the else-aktor otherwise', async (t) => {
  const positive = branch((n: number) => n > 0, (n: number) => `+${n}`, (n: number) => `-${Math.abs(n)}`)
  const ctx = contextWith()
  t.equal(await positive(3, ctx), '+3')
  t.equal(await positive(-2, ctx), '-2')

  const calls: string[] = []
  const viaAsync = branch(async () => false, () => { calls.push('then'); return 1 }, () => { calls.push('else'); return 2 })
  t.equal(await viaAsync(undefined, ctx), 2)
  t.same(calls, ['else'], 'only the chosen aktor runs')
})

t.test('branch passes the same context to the predicate and the chosen aktor', async (t) => {
  const seen: AktorContext[] = []
  const record = (value: boolean): Aktor<unknown, boolean> => (_input, context) => { seen.push(context); return value }
  const ctx = contextWith()
  await branch(record(true), record(true), record(false))(undefined, ctx)
  t.equal(seen.length, 2)
  t.ok(seen.every((c) => c === ctx))
})

t.test('setting reads the named setting from the context', async (t) => {
  const ctx = contextWith({ settings: { message: 'hello', limit: 0, flag: false } })
  t.equal(await setting('message')(undefined, ctx), 'hello')
  t.equal(await setting('limit')(undefined, ctx), 0, 'falsy values are values')
  t.equal(await setting('flag')(undefined, ctx), false)
})

t.test('setting throws a clear error naming a missing setting and the reaktor', async (t) => {
  const ctx = contextWith({ settings: { message: 'hello' }, reaktorId: 'heartbeat' })
  const read = setting('mesage')
  t.throws(() => read(undefined, ctx), MissingSettingError)
  t.throws(() => read(undefined, ctx), { message: /setting "mesage" is not defined for reaktor "heartbeat"/ })
  t.throws(() => read(undefined, contextWith({ settings: { toString: undefined } as never })), MissingSettingError, 'inherited names are not settings')
  t.throws(() => setting(''), TypeError)
})

t.test('parallel runs an object of aktors concurrently and returns an object of outputs', async (t) => {
  const started: string[] = []
  const gate = deferred()
  const slow = (name: string, value: number): Aktor<number, number> => async (input) => {
    started.push(name)
    await gate.promise
    return input + value
  }
  const run = parallel({ a: slow('a', 1), b: slow('b', 2), c: constant('c') })
  const result = run(10, contextWith())
  // Both slow aktors started before either finished: they run concurrently.
  await Promise.resolve()
  t.same(started.sort(), ['a', 'b'])
  gate.resolve()
  t.same(await result, { a: 11, b: 12, c: 'c' })
})

t.test('parallel over an array keeps the order of the aktors', async (t) => {
  const later = deferred<string>()
  const run = parallel([async () => await later.promise, constant('second'), (n: number) => n * 2])
  const result = run(21, contextWith())
  later.resolve('first')
  t.same(await result, ['first', 'second', 42])
  t.same(await parallel([])(undefined, contextWith()), [])
  t.same(await parallel({})(undefined, contextWith()), {})
})

t.test('parallel gives each aktor the context with a signal of its own', async (t) => {
  const seen: AktorContext[] = []
  const ctx = contextWith({ settings: { x: 1 } })
  await parallel([(_i, c) => { seen.push(c); return 1 }, (_i, c) => { seen.push(c); return 2 }])(undefined, ctx)
  t.equal(seen.length, 2)
  for (const c of seen) {
    t.equal(c.settings, ctx.settings)
    t.equal(c.reaktorId, ctx.reaktorId)
    t.equal(c.runId, ctx.runId)
    t.equal(c.log, ctx.log)
    t.not(c.signal, ctx.signal, 'a derived signal, so a failure can abort the siblings only')
  }
})

t.test('parallel: the first failure rejects at once and aborts the siblings\' signals', async (t) => {
  const seen: AbortSignal[] = []
  const failing: Aktor<unknown, never> = async () => { throw new Error('boom') }
  const parent = new AbortController()
  // This one ignores its signal and never settles: parallel must not wait for it.
  const stubborn: Aktor<unknown, never> = async (_input, c) => { seen.push(c.signal); return await new Promise<never>(() => {}) }
  const run = parallel({ slow1: untilAborted(seen), fails: failing, slow2: untilAborted(seen), stubborn })
  await t.rejects(run(undefined, contextWith({ signal: parent.signal })), { message: 'boom' }, 'rejects with the first failure')
  t.equal(seen.length, 3)
  t.ok(seen.every((s) => s.aborted), 'every sibling saw its signal aborted')
  t.match(seen[0].reason, { name: 'AbortError', cause: { message: 'boom' } }, 'the abort reason points at the failure')
  t.equal(parent.signal.aborted, false, 'the parent signal is left alone')
})

t.test('parallel: a synchronous throw counts as a failure too', async (t) => {
  const seen: AbortSignal[] = []
  const run = parallel([untilAborted(seen), () => { throw new Error('sync boom') }])
  await t.rejects(run(undefined, contextWith()), { message: 'sync boom' })
  t.ok(seen[0].aborted)
})

t.test('parallel: aborting the parent signal reaches every child', async (t) => {
  const seen: AbortSignal[] = []
  const parent = new AbortController()
  const result = parallel([untilAborted(seen), untilAborted(seen)])(undefined, contextWith({ signal: parent.signal }))
  parent.abort(new Error('stopped'))
  await t.rejects(result, { message: 'stopped' })
  t.equal(seen.length, 2)
  t.ok(seen.every((s) => s.aborted))
})

t.test('parallel does not start when the signal is already aborted', async (t) => {
  const parent = new AbortController()
  parent.abort(new Error('too late'))
  let ran = false
  await t.rejects(parallel([() => { ran = true }])(undefined, contextWith({ signal: parent.signal })), { message: 'too late' })
  t.equal(ran, false)
})

t.test('pipe runs the aktors in order, each on the previous output', async (t) => {
  const order: string[] = []
  const run = pipe(
    async (n: number) => { order.push('a'); return n + 1 },
    (n: number) => { order.push('b'); return n * 10 },
    async (n: number) => { order.push('c'); return `=${n}` }
  )
  t.equal(await run(1, contextWith()), '=20')
  t.same(order, ['a', 'b', 'c'])
  t.throws(() => (pipe as (...a: unknown[]) => unknown)(), TypeError)
  t.throws(() => (pipe as (...a: unknown[]) => unknown)(constant(1), 'nope'), /pipe: argument 2 must be an aktor/)
})

t.test('pipe passes the same context to every step', async (t) => {
  const seen: AktorContext[] = []
  const step: Aktor<unknown, unknown> = (input, c) => { seen.push(c); return input }
  const ctx = contextWith()
  await pipe(step, step, step)(undefined, ctx)
  t.same(seen.map((c) => c === ctx), [true, true, true])
})

t.test('abort propagation: a parent abort during a pipe step stops the pipe before the next step', async (t) => {
  const parent = new AbortController()
  const stepStarted = deferred()
  const release = deferred()
  let secondRan = false
  const run = pipe(
    async (_input: unknown, c: AktorContext) => { stepStarted.resolve(); await release.promise; return c.signal.aborted },
    () => { secondRan = true; return 'done' }
  )
  const result = run(undefined, contextWith({ signal: parent.signal }))
  await stepStarted.promise
  parent.abort(new Error('stop'))
  release.resolve()
  await t.rejects(result, { message: 'stop' })
  t.equal(secondRan, false)
})

t.test('abort propagation: through pipe → parallel → branch to the innermost aktor', async (t) => {
  const seen: AbortSignal[] = []
  const parent = new AbortController()
  const inner = branch(constant(true), untilAborted(seen), constant('never'))
  const run = pipe(constant(1), parallel({ waiting: inner, other: untilAborted(seen) }))
  const result = run(undefined, contextWith({ signal: parent.signal }))
  // Wait until both innermost aktors are running, then abort the run.
  while (seen.length < 2) await new Promise((resolve) => setImmediate(resolve))
  parent.abort(new Error('run stopped'))
  await t.rejects(result, { message: 'run stopped' })
  t.ok(seen.every((s) => s.aborted), 'the innermost aktors saw the abort')
})

t.test('abort propagation: branch does not run the chosen aktor after an abort during the predicate', async (t) => {
  const parent = new AbortController()
  let chosenRan = false
  const run = branch(async () => { parent.abort(new Error('aborted in predicate')); return true }, () => { chosenRan = true; return 1 }, constant(2))
  await t.rejects(run(undefined, contextWith({ signal: parent.signal })), { message: 'aborted in predicate' })
  t.equal(chosenRan, false)
})

t.test('combinators reject what is not an aktor where they are built', async (t) => {
  t.throws(() => branch(constant(true), 'x' as never, constant(1)), /branch: the then-aktor must be an aktor/)
  t.throws(() => parallel({ a: constant(1), b: 42 as never }), /parallel: entry "b" must be an aktor/)
  t.throws(() => parallel([constant(1), null as never]), /parallel: entry \[1\] must be an aktor .*, got null/)
  t.throws(() => parallel('x' as never), /expected an array or an object of aktors/)
})
