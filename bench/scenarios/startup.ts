/**
 * Scenario 9: start-up of the server as `npm start` runs it from source, on a fresh DATA_DIR
 * (initdb, the admin password hashed) and on the same one again.
 */
import { spawn } from 'node:child_process'
import fs from 'node:fs/promises'
import path from 'node:path'
import { note, P, print, results } from '../context.js'
import { median, ROOT, type Row } from '../lib.js'

/** Starts `node src/server.ts` on DATA_DIR and resolves with the times of its log milestones. */
async function serverStart (dataDir: string): Promise<{ pgMs: number, listeningMs: number }> {
  const t0 = Date.now()
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: '', DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', NODE_ID: 'bench-startup' },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let out = ''
  let pgMs = NaN
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  const listening = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not listen within 120 s: ${out}`)), 120_000)
    const onData = (d: Buffer): void => {
      out += d.toString()
      if (Number.isNaN(pgMs) && out.includes('embedded PostgreSQL started')) pgMs = Date.now() - t0
      if (/Server listening at/.test(out)) { clearTimeout(timer); resolve(Date.now() - t0) }
    }
    child.stdout.on('data', onData)
    child.stderr.on('data', onData)
    void exited.then((code) => { clearTimeout(timer); reject(new Error(`server exited (${code}) before listening: ${out}`)) })
  })
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
  await exited
  clearTimeout(timer)
  return { pgMs, listeningMs: listening }
}

export async function scenario9 (tmp: string): Promise<void> {
  note('scenario 9: start-up time')
  const fresh: Array<{ pgMs: number, listeningMs: number }> = []
  const warm: Array<{ pgMs: number, listeningMs: number }> = []
  let dir = ''
  for (let i = 0; i < P.s9Fresh; i++) {
    dir = path.join(tmp, `startup-${i}`)
    await fs.mkdir(dir, { recursive: true, mode: 0o755 })
    await fs.chmod(dir, 0o755)
    fresh.push(await serverStart(dir))
  }
  for (let i = 0; i < P.s9Warm; i++) warm.push(await serverStart(dir))
  const row = (label: string, list: typeof fresh): Row => ({
    start: label,
    samples: list.length,
    'embedded PostgreSQL ready ms (median)': Math.round(median(list.map((l) => l.pgMs))),
    'listening ms (median)': Math.round(median(list.map((l) => l.listeningMs))),
    'listening ms (max)': Math.round(Math.max(...list.map((l) => l.listeningMs)))
  })
  print('Scenario 9: start-up of `node --import tsx src/server.ts` (process spawn → "Server listening"), embedded PostgreSQL, shipped example apps', [row('first run (fresh DATA_DIR: initdb, admin password)', fresh), row('warm (same DATA_DIR again)', warm)])
  results.s9 = { fresh, warm }
}
