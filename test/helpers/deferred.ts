/** A promise and its resolver, to let a test decide when an aktor finishes. */
export function deferred<T = void> (): { promise: Promise<T>, resolve: (value: T) => void } {
  let resolve!: (value: T) => void
  const promise = new Promise<T>((r) => { resolve = r })
  return { promise, resolve }
}
