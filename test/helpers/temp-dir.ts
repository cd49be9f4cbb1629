import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import type { TestContext } from './test-context.js'

/** A temporary folder, removed at teardown. */
export async function tempDir (t: TestContext, prefix = 'reaktor-'): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix))
  t.teardown(async () => await fs.rm(dir, { recursive: true, force: true }))
  return dir
}
