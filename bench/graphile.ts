/**
 * Scenario 10: scenarios 4 and 5 on graphile-worker, in its own process, on its own database of
 * the same PostgreSQL server. Each "reaktor" is a self-rescheduling job: a run re-adds its own job
 * (`runAt` one interval later for `interval`, at once for `drain`), which is how a polling loop is
 * written on a job queue.
 */
import pg from 'pg'
import { Logger, run, runMigrations, type Runner, type Task } from 'graphile-worker'
import { fatal, RunWindow, serveParent } from './lib.js'

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
const runWindow = new RunWindow(n, opts.intervalMs)
const quiet = new Logger(() => () => {})

const tick: Task = async (payload, helpers) => {
  const i = (payload as { i: number }).i
  if (opts.behaviour === 'interval') {
    runWindow.intervalRun(i)
    await helpers.addJob('tick', { i }, { runAt: new Date(Date.now() + opts.intervalMs), maxAttempts: 1 })
  } else {
    runWindow.drainRun()
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
    stats: () => ({ everRan: runWindow.everRan }),
    begin: () => runWindow.begin(),
    report: () => {
      const mem = process.memoryUsage()
      return { ...runWindow.end(), rss: mem.rss, heapUsed: mem.heapUsed }
    }
  }, async () => { await runner?.stop() })
  process.send?.({ type: 'ready', pid: process.pid })
} catch (err) {
  fatal(err)
}
