/**
 * `npm run bench [-- --quick] [-- --only=1,2,4] [-- --profile] [-- --history=N] [-- --no-context] [-- --miss-a-target]`
 *
 * Every scenario, measured side by side in one run against one embedded PostgreSQL (the scenarios
 * are in bench/scenarios/, what they share in bench/context.ts). Each process under test runs in
 * its own child process, and so does the load generator. Prints one table per scenario, writes
 * everything to bench/results/latest.json (a full run of a clean checkout also to
 * bench/results/<date>-<commit>-full.json, kept in git: `npm run bench:report` renders the docs'
 * tables from it), and exits 1 when a target was missed, the missed ones printed last.
 *
 * --profile: the service's HTTP server and the scheduler nodes run with --cpu-prof (profiles in
 * bench/results/profiles; `node --import tsx bench/profile.ts FILE` prints the hottest functions).
 *
 * --history=N: RUN_HISTORY_PER_REAKTOR of scenario 4's node (default 100, the service's; 0: off).
 * With history on, every reaktor starts with N history rows, so the pruning runs as it does in a
 * steady state, not only after N runs of each.
 *
 * --miss-a-target: adds a target no run meets (the run taking no time), to see a miss printed
 * last and the exit code 1 without waiting for a real one.
 */
import { spawnSync } from 'node:child_process'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { args, cleanups, flags, judge, judgments, P, runs, startDatabase, writeResults } from './context.js'
import { verdictText } from './targets.js'
import { ROOT, round } from './lib.js'
import { pinning, removeScripts } from './load.js'
import { httpScenarios } from './scenarios/http.js'
import { scenario12 } from './scenarios/publish.js'
import { scenario10 } from './scenarios/queues.js'
import { scenario11 } from './scenarios/scale.js'
import { scenario4and5, scenario6, scenario7 } from './scenarios/scheduler.js'
import { scenario9 } from './scenarios/startup.js'

async function main (): Promise<void> {
  const started = Date.now()
  const tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'reaktor-bench-'))
  // The DATA_DIRs below are inside this folder: as root, the `postgres` user must be able to enter
  // it, or their clusters would go to EMBEDDED_POSTGRES_DIR and outlive the run.
  await fs.chmod(tmp, 0o755)
  cleanups.push(async () => await fs.rm(tmp, { recursive: true, force: true }))
  const machine = { cpus: os.cpus().length, model: os.cpus()[0]?.model, memoryGB: round(os.totalmem() / 2 ** 30, 1), node: process.version, platform: `${os.platform()} ${os.release()}`, pinned: pinning() }
  const git = (...a: string[]): string => spawnSync('git', a, { cwd: ROOT, encoding: 'utf8' }).stdout?.trim() ?? ''
  const commit = git('rev-parse', '--short', 'HEAD') || 'unknown'
  const clean = git('status', '--porcelain', '--untracked-files=no') === ''
  process.stdout.write(`reaktor-service benchmark (${flags.quick ? 'quick' : 'full'}) of commit ${commit}${clean ? '' : ' with local changes'}, \`npm run bench${args.length > 0 ? ` -- ${args.join(' ')}` : ''}\`, on ${machine.cpus} × ${machine.model}, ${machine.memoryGB} GB, Node ${machine.node}, ${machine.platform}\n`)

  await startDatabase(path.join(tmp, 'pg'))
  cleanups.push(removeScripts)

  if ([1, 2, 3, 8].some(runs)) await httpScenarios(tmp)
  const ours = await scenario4and5(tmp)
  if (runs(6)) await scenario6(tmp)
  if (runs(7)) await scenario7(tmp)
  if (runs(9)) await scenario9(tmp)
  if (runs(10)) await scenario10(ours)
  if (runs(11)) await scenario11(tmp)
  if (runs(12)) await scenario12(tmp)

  const elapsed = round((Date.now() - started) / 1000, 0)
  if (flags.missATarget) judge({ scenario: 'run', what: 'elapsed (--miss-a-target)', target: '0 s', measured: `${elapsed} s`, met: false })
  process.stdout.write(`\ntotal ${elapsed} s\n`)
  const kept = await writeResults({ commit, clean, at: new Date().toISOString(), elapsedSeconds: elapsed, machine, params: P })
  if (kept !== undefined) process.stdout.write(`results: ${kept}\n`)
}

/** The verdict, last: the missed targets (each on its own row), or that every one was met. */
function verdict (): number {
  const all = judgments()
  process.stdout.write(`\n${verdictText(all)}\n`)
  return all.some((j) => j.met === false) ? 1 : 0
}

let failed = false
try {
  await main()
} catch (err) {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`)
  failed = true
} finally {
  // Children first (newest first), the database last.
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {})
}
// After the cleanup, so that nothing a child prints as it stops comes after the verdict.
process.exit(failed ? 1 : verdict())
