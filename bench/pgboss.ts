/**
 * Scenario 10: scenarios 4 and 5 on pg-boss, in its own process, on its own database of the same
 * PostgreSQL server, with the settings of bench/peers.ts (batch fetches of 100 with burst, 4
 * workers, the minimum polling interval, LISTEN/NOTIFY).
 *
 * Each "reaktor" is a self-rescheduling job, as on graphile-worker: a worker fetches a batch, runs
 * it, and adds the next job of every reaktor in the batch with one `insert()` (`startAfter` one
 * interval later for `interval`, no delay for `drain`); pg-boss completes the batch in one
 * statement when the handler returns. The queue's policy is 'short' and each job's `singletonKey`
 * is its reaktor (`tick:<i>`): at most one queued job per reaktor, while the next one can be added
 * as the current one runs. Its cron does not fit a 3 s interval: "schedules are checked every 30
 * seconds, which means the 6-placeholder format should be discouraged in favor of the
 * minute-level precision 5-placeholder format".
 *
 * A job due later is found by polling, never announced (a NOTIFY is sent only for a job runnable
 * at once), and the polling interval is at least 0.5 s: that shows as lateness in scenario 4.
 */
import { PgBoss, type JobInsert } from 'pg-boss'
import { fatal, RunWindow, serveParent } from './lib.js'
import type { PgBossSettings } from './peers.js'

interface Options {
  databaseUrl: string
  reaktors: number
  intervalMs: number
  behaviour: 'interval' | 'drain'
  settings: PgBossSettings
}

const QUEUE = 'tick'
const opts = JSON.parse(process.argv[2]) as Options
const n = opts.reaktors
const s = opts.settings
const runWindow = new RunWindow(n, opts.intervalMs)
let errors = 0

const boss = new PgBoss({
  connectionString: opts.databaseUrl,
  max: s.max,
  useListenNotify: s.useListenNotify,
  schedule: false
})
boss.on('error', (err: Error) => {
  if (errors++ === 0) process.stderr.write(`pg-boss: ${err.message}\n`)
})

/** A job of reaktor `i`: its key makes it the only pending one of that reaktor. */
function job (i: number): JobInsert<{ i: number }> {
  return { data: { i }, singletonKey: `tick:${i}` }
}

/** The job that runs reaktor `i` next. */
function nextJob (i: number): JobInsert<{ i: number }> {
  return opts.behaviour === 'interval' ? { ...job(i), startAfter: new Date(Date.now() + opts.intervalMs) } : job(i)
}

try {
  await boss.start()
  await boss.createQueue(QUEUE, { policy: s.policy, retryLimit: s.retryLimit, notify: s.useListenNotify })
  // Every job due at once, as the service's autoStart reaktors are on a cold start.
  await boss.insert(QUEUE, Array.from({ length: n }, (_, i) => job(i)))
  await boss.work<{ i: number }>(QUEUE, {
    batchSize: s.batchSize,
    localConcurrency: s.localConcurrency,
    burstWhenBatchFull: s.burstWhenBatchFull,
    pollingIntervalSeconds: s.pollingIntervalSeconds,
    notifyPollingIntervalSeconds: s.notifyPollingIntervalSeconds
  }, async (jobs) => {
    const next: Array<JobInsert<{ i: number }>> = []
    for (const job of jobs) {
      const i = job.data.i
      if (opts.behaviour === 'interval') runWindow.intervalRun(i)
      else runWindow.drainRun()
      next.push(nextJob(i))
    }
    await boss.insert(QUEUE, next)
  })
  serveParent({
    stats: () => ({ everRan: runWindow.everRan, errors }),
    begin: () => runWindow.begin(),
    report: (msg) => ({ ...runWindow.end(Number(msg.lateMs ?? 0)), errors })
  }, async () => { await boss.stop({ graceful: true, timeout: 5000 }) })
  process.send?.({ type: 'ready', pid: process.pid })
} catch (err) {
  fatal(err)
}
