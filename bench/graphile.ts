/**
 * Scenario 10: scenarios 4 and 5 on graphile-worker, in its own process, on its own database of
 * the same PostgreSQL server. Each "reaktor" is a self-rescheduling job: a run re-adds its own job
 * (`runAt` one interval later for `interval`, at once for `drain`), which is how a polling loop is
 * written on a job queue.
 */
import { performance } from 'node:perf_hooks'
import pg from 'pg'
import { Logger, run, runMigrations, type Runner, type Task } from 'graphile-worker'
import { fatal, percentile, serveParent } from './lib.js'

interface Options {
  databaseUrl: string
  reaktors: number
  intervalMs: number
  behaviour: 'interval' | 'drain'
  concurrency: number
  pollInterval: number
}

const opts = JSON.parse(process.argv[2]) as Options
const n = opts.reaktors
const lastStart = new Float64Array(n)
let measuring = false
let runs = 0
let gaps: number[] = []
let everRan = 0
let lastAtBegin = new Float64Array(0)
let beganAt = 0

/**
 * Runs in the window, counted in fractions of an interval: plus the part of an interval each
 * reaktor has waited since its last run at the end, minus the same at the start. A plain count
 * jumps by a whole burst when the window edge falls inside one (all reaktors start together, so
 * their runs come in bursts); this does not, and a reaktor that stopped running still counts 0.
 */
function cycles (endAt: number, intervalMs: number): number {
  let sum = runs
  if (intervalMs <= 0) return sum
  for (let i = 0; i < lastStart.length; i++) {
    sum += Math.min(1, (endAt - lastStart[i]) / intervalMs) - Math.min(1, (beganAt - lastAtBegin[i]) / intervalMs)
  }
  return sum
}
const quiet = new Logger(() => () => {})

const tick: Task = async (payload, helpers) => {
  const i = (payload as { i: number }).i
  const t = performance.now()
  if (opts.behaviour === 'interval') {
    const previous = lastStart[i]
    if (previous === 0) everRan++
    else if (measuring) gaps.push(t - previous - opts.intervalMs)
    lastStart[i] = t
    if (measuring) runs++
    await helpers.addJob('tick', { i }, { runAt: new Date(Date.now() + opts.intervalMs), maxAttempts: 1 })
  } else {
    everRan = 1
    if (measuring) runs++
    await helpers.addJob('tick', { i }, { maxAttempts: 1 })
  }
}

let runner: Runner | undefined
try {
  const base = { connectionString: opts.databaseUrl, logger: quiet, noHandleSignals: true }
  await runMigrations(base)
  const client = new pg.Client({ connectionString: opts.databaseUrl })
  await client.connect()
  // Every job due at once, as the service's autoStart reaktors are on a cold start.
  await client.query(`select graphile_worker.add_job('tick', json_build_object('i', g), max_attempts := 1) from generate_series(0, $1::int - 1) as g`, [n])
  await client.end()
  runner = await run({
    ...base,
    concurrency: opts.concurrency,
    maxPoolSize: opts.concurrency + 2,
    pollInterval: opts.pollInterval,
    taskList: { tick }
  })
  serveParent({
    stats: () => ({ everRan }),
    begin: () => {
      runs = 0
      gaps = []
      measuring = true
      lastAtBegin = Float64Array.from(lastStart)
      beganAt = performance.now()
      return { at: beganAt }
    },
    report: () => {
      measuring = false
      const endAt = performance.now()
      const mem = process.memoryUsage()
      return {
        runs,
        gapCount: gaps.length,
        gapP50: percentile(gaps, 50),
        gapP99: percentile(gaps, 99),
        gapMax: gaps.reduce((a, b) => Math.max(a, b), -Infinity),
        rss: mem.rss,
        heapUsed: mem.heapUsed,
        cycles: cycles(endAt, opts.intervalMs),
        at: endAt
      }
    }
  }, async () => { await runner?.stop() })
  process.send?.({ type: 'ready', pid: process.pid })
} catch (err) {
  fatal(err)
}
