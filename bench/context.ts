/**
 * What every scenario of `npm run bench` shares, one context for the run: the flags and the
 * durations they set, the embedded PostgreSQL with a database per scenario, the child processes
 * and their cleanup, and the output (the printed tables, the judged targets, the JSON).
 */
import { randomBytes } from 'node:crypto'
import fs from 'node:fs/promises'
import path from 'node:path'
import pg from 'pg'
import { startEmbeddedPostgres } from '../src/db/embedded.js'
import { databaseUrlFor } from '../test/helpers/database.js'
import { BENCH_DIR, delay, forkChild, formatTable, keepNonFinite, ROOT, type ChildHandle, type Row } from './lib.js'
import { ADMIN } from './fixture.js'
import type { NodeOptions } from './node.js'
import { metCell, type Judgment } from './targets.js'

export const args = process.argv.slice(2)
const option = (name: string): string | undefined => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)

export const flags = {
  quick: args.includes('--quick'),
  profile: args.includes('--profile'),
  /** --no-context: the HTTP scenarios without their context peers (@fastify/static, nginx). */
  withContext: !args.includes('--no-context'),
  only: option('only')?.split(',').map(Number),
  /** RUN_HISTORY_PER_REAKTOR of scenario 4's node (0: off). */
  historyPerReaktor: Number(option('history') ?? 100),
  /** One more target, which no run meets: how to see that a miss is printed last and exits 1. */
  missATarget: args.includes('--miss-a-target')
}

export const runs = (n: number): boolean => flags.only === undefined || flags.only.includes(n)

/** Every duration and count of the run; quick mode keeps the whole run near 2 minutes. */
export const P = flags.quick
  ? { httpSeconds: 2, warmupSeconds: 1, rounds: 3, connections: 50, s4Reaktors: 10_000, s4WindowMs: 6000, s4SettleMs: 3000, s5WindowMs: 2000, s6Samples: 5, s7Kills: 2, s9Fresh: 1, s9Warm: 1, catchUpMs: 10_000, s11WindowMs: 6000, s11Cases: [0], s11Kills: 1, s12Publishes: 5, s12MemoryActivations: 5, s12Reaktors: 2000, s12Activations: 2, s12WindowMs: 9000 }
  : { httpSeconds: 10, warmupSeconds: 2, rounds: 3, connections: 50, s4Reaktors: 10_000, s4WindowMs: 30_000, s4SettleMs: 6000, s5WindowMs: 10_000, s6Samples: 20, s7Kills: 10, s9Fresh: 2, s9Warm: 3, catchUpMs: 60_000, s11WindowMs: 30_000, s11Cases: [0, 1, 2], s11Kills: 3, s12Publishes: 10, s12MemoryActivations: 20, s12Reaktors: 10_000, s12Activations: 5, s12WindowMs: 30_000 }
// Scenario 11 subsets: --cases=0,2 (of its SCALE_CASES) and --kills=N.
const cases = option('cases')
const kills = option('kills')
if (cases !== undefined) P.s11Cases = cases.split(',').map(Number)
if (kills !== undefined) P.s11Kills = Number(kills)

export const INTERVAL_MS = 3000
export const RESULTS_DIR = path.join(BENCH_DIR, 'results')

// ------------------------------------------------------------------ output

/** Everything measured, by scenario: the JSON's `results`. */
export const results: Record<string, unknown> = {}
const tables: string[] = []
const judged: Judgment[] = []
/** Run at the end, newest first: children before the database. */
export const cleanups: Array<() => Promise<unknown>> = []

export function print (title: string, rows: Row[]): void {
  const text = formatTable(title, rows)
  tables.push(text)
  process.stdout.write(`\n${text}`)
}

export function note (text: string): void {
  process.stderr.write(`  … ${text}\n`)
}

/** Records a row's judged targets (the exit code and the JSON read them); the row's "met" cell. */
export function judge (...judgments: Judgment[]): string {
  judged.push(...judgments)
  return metCell(judgments)
}

export function judgments (): readonly Judgment[] {
  return judged
}

/** Node flags of a process under test: with --profile, a CPU profile written when it exits. */
export function profileArgv (): string[] {
  return flags.profile ? ['--cpu-prof', `--cpu-prof-dir=${path.join(RESULTS_DIR, 'profiles')}`] : []
}

/**
 * Writes the JSON of the run to bench/results/latest.json and, for a plain `npm run bench` (every
 * scenario, no flag) on a clean checkout, to bench/results/<date>-<commit>-full.json, the file
 * kept in git: the tables of the README and docs/performance.md are rendered from it
 * (`npm run bench:report`). Format 2 carries the judged targets; the report judges older files
 * itself. Infinity and NaN are kept as strings (a stall is an infinite gap, not "no gap").
 */
export async function writeResults (meta: { commit: string, clean: boolean } & Record<string, unknown>): Promise<string | undefined> {
  await fs.mkdir(RESULTS_DIR, { recursive: true })
  const json = JSON.stringify({ format: 2, mode: flags.quick ? 'quick' : 'full', ...meta, args, results, targets: judged, tables }, keepNonFinite, 2) + '\n'
  await fs.writeFile(path.join(RESULTS_DIR, 'latest.json'), json)
  if (args.length > 0 || !meta.clean) return undefined
  const kept = path.join(RESULTS_DIR, `${new Date().toISOString().slice(0, 10)}-${meta.commit}-full.json`)
  await fs.writeFile(kept, json)
  return path.relative(ROOT, kept)
}

// ------------------------------------------------------------------ database

let adminUrl: string | undefined

/** The run's embedded PostgreSQL, in `dataDir`, stopped among the cleanups. */
export async function startDatabase (dataDir: string): Promise<void> {
  const embedded = await startEmbeddedPostgres({ dataDir, log: { info: () => {}, warn: () => {} } })
  adminUrl = embedded.adminUrl
  cleanups.push(async () => await embedded.stop())
}

/** A new, empty database of the run's PostgreSQL (dropped first if a previous scenario left one). */
export async function createDatabase (name: string): Promise<string> {
  if (adminUrl === undefined) throw new Error('the database is not started')
  const client = new pg.Client({ connectionString: adminUrl })
  await client.connect()
  try {
    await client.query(`drop database if exists ${name} with (force)`)
    await client.query(`create database ${name}`)
  } finally {
    await client.end()
  }
  return databaseUrlFor(adminUrl, name)
}

// ------------------------------------------------------------------ service nodes

export function nodeOptions (databaseUrl: string, tmp: string, over: Partial<NodeOptions>): NodeOptions {
  return {
    databaseUrl,
    dataDir: path.join(tmp, `node-data-${randomBytes(3).toString('hex')}`),
    nodeId: 'bench-node',
    reaktors: 1,
    interval: '3s',
    intervalMs: INTERVAL_MS,
    behaviour: 'interval',
    autoStart: true,
    compete: true,
    listen: false,
    ...over
  }
}

/** A service node (bench/node.ts) in its own process, shut down among the cleanups. */
export function startNode (name: string, opts: NodeOptions, extraArgv: string[] = []): ChildHandle {
  const child = forkChild(name, 'node.ts', [JSON.stringify(opts)], { execArgv: [...extraArgv, ...profileArgv()] })
  cleanups.push(async () => await child.shutdown())
  return child
}

/** Polls `check` until it is true (bounded). */
export async function until (what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await delay(100)
  }
}

/** A session token of the bench admin, from a login on `url`. */
export async function apiToken (url: string): Promise<string> {
  const res = await fetch(`${url}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN) })
  if (res.status !== 200) throw new Error(`bench login failed: ${res.status} ${await res.text()}`)
  return (await res.json() as { token: string }).token
}
