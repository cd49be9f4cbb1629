/**
 * Test timing in one place: the margins for busy machines, the deadlines of waits, and `waitFor`.
 *
 * A timing assertion checks a promise of the product ("a stop aborts the run within 50 ms of the
 * request") plus a margin: what a busy machine may add before the test sees what the product did.
 * The suite shares two cores between PostgreSQL, the nodes under test and other test files, so an
 * event loop turns late, a NOTIFY waits for a core, a process takes seconds to start. The margin is
 * not part of the promise: it keeps a product that keeps its promise from failing on a loaded
 * machine. `bound(promisedMs, margin)` is the two together: the promise is written where it is
 * checked, the margin is named from MARGIN_MS below, which holds every margin of the suite.
 *
 * A wait that checks no promise (a cluster to settle, a process to start) or a generous limit far
 * beyond one (an answer "not five minutes later") has a deadline instead: `deadline(ms)`.
 * `waitFor` polls until its deadline (10 s unless told).
 *
 * TEST_TIME_SCALE (a number, at least 1; default 1) multiplies every margin and every deadline, never
 * a promise: a machine slower than two shared cores sets 2 (`TEST_TIME_SCALE=2 npm test`). test/run.ts
 * multiplies tap's own limit per test file (package.json "tap".timeout) by it too.
 *
 * Not every comparison of times takes a margin:
 * - "not before" (a run one interval after the last, a refusal after the expiry): a busy machine
 *   only makes things later, so these allow the clocks' rounding (a few ms), never scaled;
 * - a bound that is the time a failure would take (answered before the statement timeout could
 *   have cancelled the wait) is that time, never scaled: any wider, it could no longer fail;
 * - `below`: a bound or deadline that must still tell its promise from a later failure ("at once",
 *   not after the 400 ms interval) stops short of that failure at any scale, so it can still fail.
 *
 * No bound is under 250 ms at scale 1 unless its file says why it cannot be wider.
 */

/** TEST_TIME_SCALE: how much slower than two shared cores the machine running the tests is. */
export const TIME_SCALE = timeScale(process.env.TEST_TIME_SCALE)

function timeScale (value: string | undefined): number {
  if (value === undefined || value === '') return 1
  const scale = Number(value)
  // A typo must not run the suite with the margins it was meant to widen.
  if (!Number.isFinite(scale) || scale < 1) throw new Error(`TEST_TIME_SCALE must be a number of at least 1; got ${JSON.stringify(value)}`)
  return scale
}

/**
 * The margins for busy machines at scale 1, by what they absorb. Each is as wide as the tests using
 * it have needed on two cores shared with other test files; widening one here widens every bound
 * that names it.
 */
export const MARGIN_MS = {
  /** The promise alone, where the product keeps far inside it (docs/accounts.md: a logout took effect elsewhere within 15 ms; promised within 1 s). */
  none: 0,
  /** A NOTIFY or an ended session heard by the node that acts on it (a stop's abort: 5–64 ms on two busy cores, docs/cluster.md, which quotes these 50 ms). */
  notify: 50,
  /** A request through any node to the run it starts on the owner: the write and its NOTIFY, the owner's wake-up, the run's start. */
  request: 200,
  /** The next turns of a busy event loop and one statement's round trip: a run "right after" another, "at once". */
  turns: 250,
  /** A change on one node noticed by another: a revocation or a role reaching its cache, a confirmation's round trip. */
  notice: 500,
  /**
   * A takeover of a crashed node's partitions, beyond docs/cluster.md's "about 1 s" (the others' next pass,
   * every second). A taken partition's first run also waits the 200 ms fencing grace, which
   * docs/cluster.md counts apart: 1 s + 200 ms + 0.5 s, the same 1.7 s.
   */
  takeover: 700,
  /**
   * A second: a few statements and a process's bookkeeping timed from outside (a flush, a scrape
   * waiting on the database). The logout and reset-password tests give a revocation this much, where
   * the users and tokens tests give the same promise `notice`: each kept the total it had.
   */
  second: 1000,
  /** Seconds: another process's start or pass, a reconnect, a request's statement timeout on two busy cores. */
  seconds: 2000,
  /** The kernel's timers on top of the database's: TCP keepalive probes and retransmissions before PostgreSQL drops a silent session. */
  keepalive: 10_000
} as const

export type Margin = keyof typeof MARGIN_MS

/** Options of `bound` and `deadline`. */
export interface Limit {
  /**
   * The earliest time of the failure the limit tells its promise from: the limit never reaches it,
   * whatever the scale. Compare with `<`.
   */
  below?: number
}

/** The margin `why` on this machine (scaled). */
export function margin (why: Margin): number {
  return MARGIN_MS[why] * TIME_SCALE
}

/** What the product promises, plus the margin `why` for a busy machine. */
export function bound (promisedMs: number, why: Margin, { below = Infinity }: Limit = {}): number {
  return Math.min(promisedMs + margin(why), below)
}

/** How long a wait may take on this machine before the test gives up (scaled). */
export function deadline (ms: number, { below = Infinity }: Limit = {}): number {
  return Math.min(ms * TIME_SCALE, below)
}

/**
 * Polls `check` until it returns a truthy value, or fails after `timeoutMs` (a `deadline`, or a
 * `bound` when the wait is what checks a promise). Never a blind sleep.
 */
export async function waitFor<T> (check: () => T | Promise<T>, { timeoutMs = deadline(10_000), intervalMs = 20, what = 'condition' } = {}): Promise<NonNullable<T>> {
  const end = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value !== undefined && value !== null && value !== false) return value as NonNullable<T>
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}
