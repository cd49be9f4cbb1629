import { performance } from 'node:perf_hooks'

/** One database read shared by the requests that join it, and the JSON of its answer, serialized once. */
export interface SharedRead<T> {
  value: Promise<T>
  json?: string
  /** Set by the first of its requests to get the value, which counts the read and caches it. */
  cached?: boolean
  generation: number
  readAt: number
}

/**
 * Coalesces concurrent identical reads: requests that arrive in the same turn of the event loop
 * share ONE database read, started (setImmediate) after all of them have arrived. A request never
 * joins a read that began before it arrived, so it still sees every write acknowledged before it
 * was sent (a start answered 200, then a status, shows `running`), on this node or any other.
 * `generation` and `readAt` are taken when the read starts, for the status cache.
 */
export function coalesce<T> (read: (key: string) => Promise<T>, generation: () => number): (key: string) => SharedRead<T> {
  const gathering = new Map<string, SharedRead<T>>()
  return (key) => {
    let shared = gathering.get(key)
    if (shared === undefined) {
      const created: SharedRead<T> = {
        generation: 0,
        readAt: 0,
        value: new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
          // From now on, newcomers start a new read.
          gathering.delete(key)
          created.generation = generation()
          created.readAt = performance.now()
          return await read(key)
        })
      }
      shared = created
      gathering.set(key, shared)
    }
    return shared
  }
}
