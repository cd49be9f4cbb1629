/**
 * Scenario 10: scenarios 4 and 5 on graphile-worker, in its own process, on its own database of
 * the same PostgreSQL server, with the settings of bench/peers.ts (its performance page's: local
 * queue, batched completion, 24 concurrent jobs).
 *
 * Each "reaktor" is a self-rescheduling job, which is how a polling loop is written on this queue:
 * a run adds the reaktor's next job with `helpers.addJob` (`runAt` one interval later for
 * `interval`, at once for `drain`) before it completes. Its crontab does not fit: the finest field
 * is the minute ("UTC minute (0 - 59)"), and the docs add that "It is not intended that you add
 * recurring tasks for each of your individual application users".
 *
 * The job carries a `jobKey` per reaktor (`tick:<i>`), so a reaktor has at most one pending job
 * however often it is added (a second add replaces the pending one). `jobKeyMode` stays the
 * default, 'replace': the job being run is locked, and for a locked job 'replace' (like
 * 'preserve_run_at') clears the running job's key and inserts the next job, which is what a loop
 * needs; 'unsafe_dedupe' would find the running job and add nothing, ending the loop. The price of
 * the key is one more row write per run (the running job's key is cleared). `addJobs`, the batch
 * form, is marked experimental and would need a buffer of our own in the task; the loop adds one
 * job per run, as the docs' `addJob` does.
 *
 * So every run commits a transaction of its own, and `add_job` NOTIFYs (`jobs:insert`) whatever
 * the job's `runAt`. PostgreSQL serializes the commits of NOTIFYing transactions: each takes a
 * lock on "database 0" and holds it until its commit record is flushed (async.c,
 * PreCommit_Notify), so concurrent runs cannot share a WAL flush, and the server's flush time
 * bounds the runs per second whatever the concurrency.
 */
import pg from 'pg'
import { Logger, run, runMigrations, type Runner, type Task } from 'graphile-worker'
import { fatal, RunWindow, serveParent } from './lib.js'
import type { GraphileSettings } from './peers.js'

interface Options {
  databaseUrl: string
  reaktors: number
  intervalMs: number
  behaviour: 'interval' | 'drain'
  settings: GraphileSettings
}

const opts = JSON.parse(process.argv[2]) as Options
const n = opts.reaktors
const s = opts.settings
const runWindow = new RunWindow(n, opts.intervalMs)
const quiet = new Logger(() => () => {})

const tick: Task = async (payload, helpers) => {
  const i = (payload as { i: number }).i
  const spec = { jobKey: `tick:${i}`, maxAttempts: 1 }
  if (opts.behaviour === 'interval') {
    runWindow.intervalRun(i)
    await helpers.addJob('tick', { i }, { ...spec, runAt: new Date(Date.now() + opts.intervalMs) })
  } else {
    runWindow.drainRun()
    await helpers.addJob('tick', { i }, spec)
  }
}

let runner: Runner | undefined
try {
  const preset = {
    worker: {
      connectionString: opts.databaseUrl,
      logger: quiet,
      concurrentJobs: s.concurrentJobs,
      maxPoolSize: s.maxPoolSize,
      pollInterval: s.pollInterval,
      localQueue: { size: s.localQueueSize },
      completeJobBatchDelay: s.completeJobBatchDelay,
      failJobBatchDelay: s.failJobBatchDelay
    }
  }
  await runMigrations({ preset })
  const client = new pg.Client({ connectionString: opts.databaseUrl })
  await client.connect()
  // Every job due at once, as the service's autoStart reaktors are on a cold start.
  await client.query(`
    select graphile_worker.add_job('tick', json_build_object('i', g), max_attempts := 1, job_key := 'tick:' || g)
    from generate_series(0, $1::int - 1) as g`, [n])
  await client.end()
  runner = await run({ preset, noHandleSignals: true, taskList: { tick } })
  serveParent({
    stats: () => ({ everRan: runWindow.everRan }),
    begin: () => runWindow.begin(),
    report: (msg) => runWindow.end(Number(msg.lateMs ?? 0))
  }, async () => { await runner?.stop() })
  process.send?.({ type: 'ready', pid: process.pid })
} catch (err) {
  fatal(err)
}
