import type { Aktor, AktorContext, AktorInput, AktorOutput, AnyAktor, AsyncAktor } from './types.js'

/*
 * The combinators take aktors and return an aktor. Each passes `context` through; the ones that
 * call other aktors (branch, pipe, parallel) check `context.signal` before starting each step, so
 * an aborted run (stop, timeout, client gone) does not start new work.
 */

function assertAktor (value: unknown, what: string): void {
  if (typeof value !== 'function') {
    throw new TypeError(`${what} must be an aktor (a function of input and context), got ${value === null ? 'null' : typeof value}`)
  }
}

/** An aktor that always returns `value`, whatever its input. */
export function constant<T> (value: T): Aktor<unknown, T> {
  return () => value
}

/** Runs `predicate`; then `whenTrue` when it returned a truthy value, else `whenFalse`. Both get the same input. */
export function branch<I, T, E> (predicate: Aktor<I, boolean>, whenTrue: Aktor<I, T>, whenFalse: Aktor<I, E>): AsyncAktor<I, T | E> {
  assertAktor(predicate, 'branch: the predicate')
  assertAktor(whenTrue, 'branch: the then-aktor')
  assertAktor(whenFalse, 'branch: the else-aktor')
  return async (input, context) => {
    context.signal.throwIfAborted()
    const chosen = (await predicate(input, context)) ? whenTrue : whenFalse
    context.signal.throwIfAborted()
    return await chosen(input, context)
  }
}

/** Thrown by `setting(name)` when the app has no such setting. */
export class MissingSettingError extends Error {
  readonly code = 'REAKTOR_MISSING_SETTING'
  constructor (public readonly setting: string, reaktorId: string) {
    super(`setting "${setting}" is not defined for reaktor "${reaktorId}"; declare it with a default in the app's package.json "reaktor.settings"`)
    this.name = 'MissingSettingError'
  }
}

/** An aktor returning the app's setting `name` (from `context.settings`); throws MissingSettingError when there is none. */
export function setting<T = unknown> (name: string): Aktor<unknown, T> {
  if (typeof name !== 'string' || name === '') throw new TypeError('setting: the name must be a non-empty string')
  return (_input, context) => {
    const settings = context.settings ?? {}
    if (!Object.hasOwn(settings, name) || settings[name] === undefined) throw new MissingSettingError(name, context.reaktorId)
    return settings[name] as T
  }
}

type UnionToIntersection<U> = (U extends unknown ? (k: U) => void : never) extends (k: infer I) => void ? I : never

/** The parallel aktors: an array (or tuple) or an object of aktors. */
export type ParallelAktors = readonly AnyAktor[] | Readonly<Record<string, AnyAktor>>

/** Outputs of `parallel`: the same shape as its aktors, each replaced by its output. */
export type ParallelOutput<T extends ParallelAktors> = { -readonly [K in keyof T]: AktorOutput<T[K]> }

// Each input is wrapped in a one-element tuple so that an `unknown` input (an aktor that ignores
// it) does not swallow the union before it becomes an intersection.
type WrappedInputs<T extends ParallelAktors> = T extends readonly AnyAktor[]
  ? { [K in keyof T]: [AktorInput<T[K]>] }[number]
  : { [K in keyof T]: [AktorInput<T[K]>] }[keyof T]

/** The input of `parallel`: what every one of its aktors accepts. */
export type ParallelInput<T extends ParallelAktors> = [WrappedInputs<T>] extends [never]
  ? unknown
  : UnionToIntersection<WrappedInputs<T>> extends infer W extends readonly [unknown] ? W[0] : unknown

/**
 * Runs the aktors concurrently with the same input; returns their outputs in the same shape
 * (array → array, object → object). The first failure rejects at once and aborts the signal the
 * others see (each gets `AbortSignal.any([parent signal, local controller])`).
 */
export function parallel<const T extends ParallelAktors> (aktors: T): AsyncAktor<ParallelInput<T>, ParallelOutput<T>> {
  if (aktors === null || typeof aktors !== 'object') throw new TypeError('parallel: expected an array or an object of aktors')
  const isArray = Array.isArray(aktors)
  const entries: Array<[string, AnyAktor]> = isArray
    ? (aktors as readonly AnyAktor[]).map((aktor, i) => [String(i), aktor])
    : Object.entries(aktors as Readonly<Record<string, AnyAktor>>)
  for (const [key, aktor] of entries) assertAktor(aktor, `parallel: entry ${isArray ? `[${key}]` : JSON.stringify(key)}`)

  return async (input, context) => {
    context.signal.throwIfAborted()
    const local = new AbortController()
    const child: AktorContext = { ...context, signal: AbortSignal.any([context.signal, local.signal]) }
    const outputs = await Promise.all(entries.map(async ([, aktor]) => {
      try {
        return await aktor(input, child)
      } catch (err) {
        if (!local.signal.aborted) {
          const reason = new Error('aborted: another aktor of the same parallel failed', { cause: err })
          reason.name = 'AbortError'
          local.abort(reason)
        }
        throw err
      }
    }))
    if (isArray) return outputs as ParallelOutput<T>
    return Object.fromEntries(entries.map(([key], i) => [key, outputs[i]])) as ParallelOutput<T>
  }
}

/** Runs the aktors one after the other: each gets the previous one's output; the first gets the input. */
export function pipe<I, A> (a: Aktor<I, A>): AsyncAktor<I, A>
export function pipe<I, A, B> (a: Aktor<I, A>, b: Aktor<A, B>): AsyncAktor<I, B>
export function pipe<I, A, B, C> (a: Aktor<I, A>, b: Aktor<A, B>, c: Aktor<B, C>): AsyncAktor<I, C>
export function pipe<I, A, B, C, D> (a: Aktor<I, A>, b: Aktor<A, B>, c: Aktor<B, C>, d: Aktor<C, D>): AsyncAktor<I, D>
export function pipe<I, A, B, C, D, E> (a: Aktor<I, A>, b: Aktor<A, B>, c: Aktor<B, C>, d: Aktor<C, D>, e: Aktor<D, E>): AsyncAktor<I, E>
export function pipe<I, A, B, C, D, E, F> (a: Aktor<I, A>, b: Aktor<A, B>, c: Aktor<B, C>, d: Aktor<C, D>, e: Aktor<D, E>, f: Aktor<E, F>): AsyncAktor<I, F>
export function pipe<I, A, B, C, D, E, F, G> (a: Aktor<I, A>, b: Aktor<A, B>, c: Aktor<B, C>, d: Aktor<C, D>, e: Aktor<D, E>, f: Aktor<E, F>, g: Aktor<F, G>): AsyncAktor<I, G>
export function pipe<I, A, B, C, D, E, F, G, H> (a: Aktor<I, A>, b: Aktor<A, B>, c: Aktor<B, C>, d: Aktor<C, D>, e: Aktor<D, E>, f: Aktor<E, F>, g: Aktor<F, G>, h: Aktor<G, H>): AsyncAktor<I, H>
// More than eight steps: nest pipes (a pipe is an aktor).
export function pipe (...aktors: AnyAktor[]): AsyncAktor<any, any> {
  if (aktors.length === 0) throw new TypeError('pipe: expected at least one aktor')
  aktors.forEach((aktor, i) => assertAktor(aktor, `pipe: argument ${i + 1}`))
  return async (input: unknown, context: AktorContext) => {
    let value = input
    for (const aktor of aktors) {
      context.signal.throwIfAborted()
      value = await aktor(value, context)
    }
    return value
  }
}
