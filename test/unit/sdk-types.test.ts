/*
 * Type-level tests of the SDK: `npm run typecheck` (tsconfig includes test/) fails when an
 * `@ts-expect-error` below stops being an error, i.e. when the SDK's types stop catching the
 * mistake. The few runtime assertions keep tap honest about the file.
 */
import t from 'tap'
import {
  branch, constant, defineApp, definePollingReaktor, defineReaktor, parallel, pipe, setting,
  type Aktor, type AsyncAktor, type PollingAktor
} from '../../src/sdk/index.js'
import type * as PublicSdk from 'reaktor-service/sdk'
import { silentLogger } from '../helpers/log.js'

type Equals<A, B> = (<X>() => X extends A ? 1 : 2) extends (<X>() => X extends B ? 1 : 2) ? true : false
const assertType = <T extends true>(_proof?: T): void => {}

// The published specifier maps to the same module for type-checking (tsconfig paths).
assertType<Equals<PublicSdk.PollingAktor, PollingAktor>>()

// A polling reaktor's aktor returns a boolean: plain functions, async functions and combinators.
const ok = [
  definePollingReaktor({ reaktorDefinitionId: 'a', interval: '5s', createReaktor: () => async () => true }),
  definePollingReaktor({ reaktorDefinitionId: 'b', interval: '5s', createReaktor: () => () => false }),
  definePollingReaktor({ reaktorDefinitionId: 'c', interval: '5s', createReaktor: () => constant(false) }),
  definePollingReaktor({
    reaktorDefinitionId: 'd',
    interval: '1m',
    autoStart: true,
    createReaktor: () => pipe(setting<string>('message'), async (message: string, context) => {
      context.log.info({ message }, 'tick')
      return false
    })
  }),
  definePollingReaktor({
    reaktorDefinitionId: 'e',
    interval: '1m',
    createReaktor: () => branch(async () => true, constant(true), constant(false))
  })
]

definePollingReaktor({
  reaktorDefinitionId: 'bad-string',
  interval: '5s',
  // @ts-expect-error a polling aktor returning a string is rejected
  createReaktor: () => async () => 'done'
})

definePollingReaktor({
  reaktorDefinitionId: 'bad-number',
  interval: '5s',
  // @ts-expect-error a polling aktor returning a number is rejected (a constant of the wrong type)
  createReaktor: () => constant(1)
})

definePollingReaktor({
  reaktorDefinitionId: 'bad-void',
  interval: '5s',
  // @ts-expect-error a polling aktor that returns nothing is rejected
  createReaktor: () => async () => {}
})

definePollingReaktor({
  reaktorDefinitionId: 'bad-branch',
  interval: '5s',
  // @ts-expect-error one branch returning a string makes the result boolean | string
  createReaktor: () => branch(constant(true), constant(true), constant('no'))
})

definePollingReaktor({
  reaktorDefinitionId: 'bad-pipe',
  interval: '5s',
  // @ts-expect-error the last step of the pipe decides the result, here a number
  createReaktor: () => pipe(constant(true), (done: boolean) => (done ? 1 : 0))
})

definePollingReaktor({
  reaktorDefinitionId: 'bad-parallel',
  interval: '5s',
  // @ts-expect-error parallel returns an object of outputs, not a boolean
  createReaktor: () => parallel({ a: constant(true) })
})

// @ts-expect-error interval is required
definePollingReaktor({ reaktorDefinitionId: 'no-interval', createReaktor: () => constant(false) })

// @ts-expect-error a misspelt field is caught where it is written
definePollingReaktor({ reaktorDefinitionId: 'typo', interval: '5s', autostart: true, createReaktor: () => constant(false) })

// Standard reaktors: any output; the input type comes from the aktor.
const double = defineReaktor({
  reaktorDefinitionId: 'double',
  createReaktor: () => async (input: { n: number }) => input.n * 2
})
assertType<Equals<ReturnType<typeof double.createReaktor>, Aktor<{ n: number }, number>>>()

// Combinator output types.
const both = parallel({ n: constant(1), s: constant('x') })
assertType<Equals<typeof both, AsyncAktor<unknown, { n: number, s: string }>>>()
const pair = parallel([constant(1), async () => 'x'])
assertType<Equals<typeof pair, AsyncAktor<unknown, [number, string]>>>()
const typedInputs = parallel([(n: number) => n + 1, constant(true)])
assertType<Equals<Parameters<typeof typedInputs>[0], number>>()
const chained = pipe((n: number) => String(n), (s: string) => s.length > 1)
assertType<Equals<typeof chained, AsyncAktor<number, boolean>>>()
// @ts-expect-error a pipe step must accept the previous step's output
pipe((n: number) => String(n), (n: number) => n > 1)

const app = defineApp({ pollingReaktors: ok, reaktors: [double] })

t.test('the registration helpers return what they are given', async (t) => {
  t.equal(app.pollingReaktors, ok)
  t.equal(app.reaktors?.[0], double)
  t.equal(ok.length, 5)
})

t.test('the values behind the types', async (t) => {
  const log = silentLogger
  const context = { signal: new AbortController().signal, log, settings: {}, reaktorId: 'types', runId: 'r1' }
  t.same(await both(undefined, context), { n: 1, s: 'x' })
  t.same(await pair(undefined, context), [1, 'x'])
  t.same(await typedInputs(1, context), [2, true])
  t.equal(await chained(10, context), true)
})
