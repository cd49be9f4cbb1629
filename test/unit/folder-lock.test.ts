import t, { type Test } from 'tap'
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { claimName, FolderInUseError, lockFolder } from '../../src/db/folder-lock.js'

async function folder (t: Test): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'reaktor-claim-'))
  t.teardown(async () => await fs.rm(dir, { recursive: true, force: true }))
  return dir
}

/** A process that holds `name` as a claim would, then is killed with SIGKILL: what a kill -9 of a service leaves. */
async function killedHolder (name: string): Promise<void> {
  const child = spawn(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify({ path: name })}, () => console.log('ready'))`],
    { stdio: ['ignore', 'pipe', 'inherit'] })
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => { if (d.toString().includes('ready')) resolve() })
    child.once('exit', (code) => reject(new Error(`holder exited early (${String(code)})`)))
  })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGKILL')
  await exited
}

for (const abstract of [true, false]) {
  const variant = abstract ? 'abstract socket (Linux)' : 'socket file (other systems)'

  t.test(`${variant}: one holder at a time; a second claim is refused naming the holder; free again after release`, async (t) => {
    const dir = await folder(t)
    const first = await lockFolder(dir, { abstract })
    await t.rejects(lockFolder(dir, { abstract }), new FolderInUseError(dir, process.pid))
    await first.release()
    const again = await lockFolder(dir, { abstract })
    await again.release()
    if (!abstract) t.notOk(existsSync(claimName(await fs.stat(dir), false)), 'the socket file is removed at release')
  })

  t.test(`${variant}: a holder killed with SIGKILL leaves no claim behind`, async (t) => {
    const dir = await folder(t)
    const name = claimName(await fs.stat(dir), abstract)
    await killedHolder(name)
    if (!abstract) t.ok(existsSync(name), 'the killed holder left its socket file')
    const claim = await lockFolder(dir, { abstract })
    t.pass('claimed after the holder was killed')
    await t.rejects(lockFolder(dir, { abstract }), FolderInUseError, 'and held: the next claim is refused')
    await claim.release()
  })
}
