/**
 * The load generator: `wrk` (C, event-driven), Debian's package, installed by the bench when it is
 * missing. One wrk thread pinned to core 1, the server under test pinned to core 0 (`taskset`, of
 * util-linux), so the two never take turns on one core: the bench first measures how fast wrk can
 * go against nginx (scenarios/http.ts, "generator ceiling"), so that a figure near that ceiling
 * reads as the generator's limit, not the server's.
 *
 * wrk's own `done` hook prints the figures as one JSON line: requests, bytes, errors by kind
 * (status: answers ≥ 400), and latency percentiles, all over the whole run.
 */
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

export interface LoadOptions {
  url: string
  method?: 'GET' | 'POST'
  headers?: Record<string, string>
  body?: string
  connections: number
  /** Seconds. */
  duration: number
}

export interface LoadResult {
  requestsPerSecond: number
  latencyP50: number
  latencyP99: number
  throughputMBps: number
  /** Mean bytes per answer, headers included: a check that the answer was the one meant. */
  bytesPerResponse: number
  total: number
  /** Answers ≥ 400. */
  non2xx: number
  errors: number
  timeouts: number
}

/** Installs a Debian package providing `command` when it is missing (root only); throws when it cannot. */
export function ensureCommand (command: string, debianPackage: string): string {
  const which = (): string => spawnSync('sh', ['-c', `command -v ${command}`], { encoding: 'utf8' }).stdout.trim()
  const found = which()
  if (found !== '') return found
  if (process.getuid?.() !== 0) throw new Error(`${command} is missing: install the Debian package ${debianPackage} (apt-get install ${debianPackage})`)
  process.stderr.write(`  … installing ${debianPackage} (apt-get)\n`)
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
  spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env })
  const install = spawnSync('apt-get', ['install', '-y', '-qq', debianPackage], { stdio: ['ignore', 'ignore', 'inherit'], env })
  const installed = install.status === 0 ? which() : ''
  if (installed === '') throw new Error(`could not install ${debianPackage}`)
  return installed
}

/** A Lua long string holding `text` as it is (no escape sequences inside). */
function luaString (text: string): string {
  let level = ''
  while (text.includes(`]${level}]`)) level += '='
  return `[${level}[${text}]${level}]`
}

const DONE = `
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK_JSON {"requests":%d,"durationUs":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50Us":%.1f,"p99Us":%.1f}\\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout, latency:percentile(50), latency:percentile(99)))
end
`

let scriptDir: string | undefined
let wrkPath: string | undefined
let tasksetPath: string | null | undefined

/** The cores of the HTTP scenarios: the server under test (and every reference server) and wrk. */
export const CORES = { server: 0, generator: 1 }

/** Whether processes are pinned: with at least two cores (taskset looked up, or installed, once). */
export function pinning (): boolean {
  tasksetPath ??= os.cpus().length >= 2 ? ensureCommand('taskset', 'util-linux') : null
  return tasksetPath !== null
}

/** `command args` run on `core` (through taskset, which execs it: the pid stays the command's), or as it is without pinning. */
export function pinned (core: number, command: string, args: string[]): [string, string[]] {
  if (!pinning()) return [command, args]
  return [tasksetPath as string, ['-c', String(core), command, ...args]]
}

/** wrk's path, looked up (and installed when missing) once per run. */
export function wrkCommand (): string {
  wrkPath ??= ensureCommand('wrk', 'wrk')
  return wrkPath
}

/** Runs wrk once, on its own core: 1 thread, `connections` connections, `duration` seconds. */
export async function load (opts: LoadOptions): Promise<LoadResult> {
  if (!new URL(opts.url).hostname.startsWith('127.')) throw new Error('the load generator only targets 127.0.0.1')
  const wrk = wrkCommand()
  scriptDir ??= await fs.mkdtemp(path.join(os.tmpdir(), 'reaktor-bench-wrk-'))
  const lines = [DONE]
  if (opts.method !== undefined) lines.push(`wrk.method = ${luaString(opts.method)}`)
  if (opts.body !== undefined) lines.push(`wrk.body = ${luaString(opts.body)}`)
  for (const [name, value] of Object.entries(opts.headers ?? {})) lines.push(`wrk.headers[ ${luaString(name)} ] = ${luaString(value)}`)
  const script = path.join(scriptDir, `load-${process.pid}-${Date.now()}.lua`)
  await fs.writeFile(script, lines.join('\n'))
  const args = ['-t1', `-c${opts.connections}`, `-d${opts.duration}s`, '--timeout', '5s', '-s', script, opts.url]
  const out = await new Promise<string>((resolve, reject) => {
    const [command, argv] = pinned(CORES.generator, wrk, args)
    const child = spawn(command, argv, { stdio: ['ignore', 'pipe', 'pipe'] })
    let text = ''
    child.stdout.on('data', (d: Buffer) => { text += d.toString() })
    child.stderr.on('data', (d: Buffer) => { text += d.toString() })
    const timer = setTimeout(() => child.kill('SIGKILL'), (opts.duration + 30) * 1000)
    child.on('error', reject)
    child.on('exit', (code) => {
      clearTimeout(timer)
      if (code === 0) resolve(text)
      else reject(new Error(`wrk exited with ${code}: ${text}`))
    })
  })
  await fs.rm(script, { force: true })
  const line = out.split('\n').find((l) => l.startsWith('WRK_JSON '))
  if (line === undefined) throw new Error(`wrk printed no figures: ${out}`)
  const r = JSON.parse(line.slice('WRK_JSON '.length)) as { requests: number, durationUs: number, bytes: number, connect: number, read: number, write: number, status: number, timeout: number, p50Us: number, p99Us: number }
  const seconds = r.durationUs / 1e6
  return {
    requestsPerSecond: r.requests / seconds,
    latencyP50: r.p50Us / 1000,
    latencyP99: r.p99Us / 1000,
    throughputMBps: r.bytes / seconds / 2 ** 20,
    bytesPerResponse: r.requests === 0 ? 0 : r.bytes / r.requests,
    total: r.requests,
    non2xx: r.status,
    errors: r.connect + r.read + r.write,
    timeouts: r.timeout
  }
}

export async function removeScripts (): Promise<void> {
  if (scriptDir !== undefined) await fs.rm(scriptDir, { recursive: true, force: true })
}
