import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

/** The part of a tap Test these helpers use. */
export interface TestContext {
  teardown: (fn: () => unknown) => void
}

/** A temporary folder, removed at teardown. */
export async function tempDir (t: TestContext, prefix = 'reaktor-'): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix))
  t.teardown(async () => await fs.rm(dir, { recursive: true, force: true }))
  return dir
}

/** Polls `check` until it returns a truthy value, or fails after `timeoutMs`. Never a blind sleep. */
export async function waitFor<T> (check: () => T | Promise<T>, { timeoutMs = 10_000, intervalMs = 20, what = 'condition' } = {}): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value !== undefined && value !== null && value !== false) return value as NonNullable<T>
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}

/** A promise and its resolver, to let a test decide when an aktor finishes. */
export function deferred<T = void> (): { promise: Promise<T>, resolve: (value: T) => void } {
  let resolve!: (value: T) => void
  const promise = new Promise<T>((r) => { resolve = r })
  return { promise, resolve }
}
