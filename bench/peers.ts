/**
 * Scenario 10's peers, the job queues that run scenarios 4 and 5 beside the service: the settings
 * each runs with (one place, read by scenarios/queues.ts for its tables and by bench/graphile.ts and
 * bench/pgboss.ts to configure the queue) and the versions actually installed.
 *
 * The job shape is the same on both, the one a user of a job queue writes for a per-reaktor
 * polling loop: one job per reaktor, keyed by the reaktor so that it has at most one pending job,
 * and each run adds the reaktor's next job before it ends (due one interval later for 4, at once
 * for 5). Neither queue's cron fits: both are minute-granular, and a reaktor's interval is 3 s.
 *
 * What that costs the database is what separates the two designs, and the tables print it: a job is
 * a durable row, so every run inserts the next job, claims it and completes it in the database,
 * where the service runs its loop in memory and writes run results in batches.
 *
 * Both packages are dev dependencies of the benchmark only. Their current versions declare Node 22
 * or later (`engines`); npm installs them on Node 20 with a warning, and they run there too.
 */
import fs from 'node:fs'
import path from 'node:path'
import { ROOT } from './lib.js'

/**
 * graphile-worker, configured as its performance page recommends for a high-throughput queue
 * (worker.graphile.org/docs/performance, and the option typings of the installed version):
 *
 * - `concurrentJobs` 24, as the page's measured configuration ("concurrentJobs: 24,
 *   maxPoolSize: 25, ... localQueue: { size: 500 }").
 * - `maxPoolSize` 26: "If in doubt, we recommend setting it to `10` or `concurrentJobs + 2`,
 *   whichever is larger."
 * - `localQueue.size` 500, the page's figure: the pool fetches (and locks) jobs in batches and
 *   hands them to its workers without a round trip each; "if you have very high throughput and
 *   extremely fast tasks then a much higher number [than concurrentJobs + 1] may make sense".
 *   A no-op task at 3,333 runs/s is both.
 * - `completeJobBatchDelay` / `failJobBatchDelay` 250 ms: "we'd advise all users to enable these
 *   settings ... `250` seems a reasonable default - release jobs at most once every quarter of a
 *   second." Completions of a quarter second go to the database in one statement, as the service
 *   writes a flush of results in one.
 * - `pollInterval` 100 ms (default 2,000): polling is how a job scheduled in the future is found
 *   when it comes due, so it bounds how late a 3 s run starts; new jobs due at once are announced
 *   by LISTEN/NOTIFY, which is always on.
 */
export const GRAPHILE = {
  concurrentJobs: 24,
  maxPoolSize: 26,
  localQueueSize: 500,
  completeJobBatchDelay: 250,
  failJobBatchDelay: 250,
  pollInterval: 100
}

export type GraphileSettings = typeof GRAPHILE

/**
 * pg-boss, configured from its documentation (pgboss.io, and the option typings of the installed
 * version):
 *
 * - a batch handler: `batchSize` 100 jobs per fetch, the next jobs of the batch added with one
 *   `insert()` ("Create multiple jobs in one request"), and the batch completed in one statement
 *   when the handler returns.
 * - `burstWhenBatchFull`: "While each fetch returns a full `batchSize` batch there is clearly more
 *   work, so the worker keeps fetching continuously with no delay".
 * - `localConcurrency` 4: "Number of workers to spawn for this queue (per-node). Each worker polls
 *   and processes jobs independently", so one worker's round trips overlap another's; up to 400
 *   jobs in hand, of the order of graphile-worker's local queue. pg-boss wakes every worker of a
 *   queue on each NOTIFY, so many more workers would mostly add empty fetches.
 * - `pollingIntervalSeconds` 0.5, the documented minimum ("Must be >= `0.5` (500 ms)"), and the
 *   same for `notifyPollingIntervalSeconds` (default 30): a job due in 3 s gets no NOTIFY (one is
 *   sent only for a job runnable at once), so polling is what finds it. Runs start up to 0.5 s late
 *   for that reason alone.
 * - `useListenNotify` and the queue's `notify`: "workers on notify-enabled queues are woken the
 *   moment a job is created, instead of waiting out their polling interval" (off by default).
 * - the queue's `policy` 'short' with the reaktor as `singletonKey`: "Only allows 1 job to be
 *   queued, unlimited active. Can be extended with `singletonKey`": at most one pending job per
 *   reaktor, and the next job can be added while the current one is active ('exclusive' would
 *   refuse it; 'stately' would add a check of the active jobs to every fetch).
 * - `retryLimit` 0, like graphile-worker's `maxAttempts` 1: a failed run is not retried.
 * - `schedule` off: the cron loop is not used.
 * - `max` 10 (node-postgres' default): pool connections for the 4 workers and the maintenance (the
 *   listener holds a connection of its own).
 *
 * Completed jobs stay in the table (7 days by default) and are deleted later by maintenance,
 * outside any measured window.
 */
export const PGBOSS = {
  batchSize: 100,
  localConcurrency: 4,
  burstWhenBatchFull: true,
  pollingIntervalSeconds: 0.5,
  notifyPollingIntervalSeconds: 0.5,
  useListenNotify: true,
  policy: 'short' as const,
  retryLimit: 0,
  max: 10
}

export type PgBossSettings = typeof PGBOSS

/** The version of an installed package, from its package.json (undefined when it is not installed). */
export function installedVersion (name: string): string | undefined {
  try {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version?: string }
    return pkg.version
  } catch {
    return undefined
  }
}

/** The settings as the tables print them. */
export function describeGraphile (s: GraphileSettings): string {
  return `concurrentJobs ${s.concurrentJobs}, maxPoolSize ${s.maxPoolSize}, localQueue.size ${s.localQueueSize}, completeJobBatchDelay ${s.completeJobBatchDelay} ms, failJobBatchDelay ${s.failJobBatchDelay} ms, pollInterval ${s.pollInterval} ms, LISTEN/NOTIFY`
}

export function describePgBoss (s: PgBossSettings): string {
  return `policy ${s.policy}, batchSize ${s.batchSize}, localConcurrency ${s.localConcurrency}, burstWhenBatchFull ${String(s.burstWhenBatchFull)}, pollingIntervalSeconds ${s.pollingIntervalSeconds}, notifyPollingIntervalSeconds ${s.notifyPollingIntervalSeconds}, useListenNotify ${String(s.useListenNotify)}, max ${s.max}`
}
