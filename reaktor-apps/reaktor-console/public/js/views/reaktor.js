// @ts-check
// One reaktor: its status (refreshed every second while the tab is visible), start/stop/run now,
// the run history with "load more", a chart of recent run durations, and its series of /metrics.
import { api, seg, LoginRequired } from '../api.js'
import { h, toast, relative, formatTime, formatDuration, set } from '../ui.js'
import { outcomeBadge, stateBadge, isFailing, outcomeKind, runControl } from './polling-common.js'
import { durationChart } from './run-chart.js'
import { metricsOf } from './metrics.js'

/** @typedef {import('./polling-common.js').Status} Status */
/**
 * A run as GET /polling/{id}/runs lists it.
 * @typedef {import('../api.js').Answer} Run
 */
/**
 * A page of runs, newest first; `nextBefore` asks for the older ones (null: there are none).
 * @typedef {{ runs: Run[], nextBefore: string | null }} RunsPage
 */
/**
 * A refresh that repeats: `run()` now, then again after its pause, while the tab is visible.
 * @typedef {{ timer: number | undefined, running: boolean, run: () => Promise<void> }} Loop
 */

const STATUS_MS = 1000
const RUNS_MS = 3000
const METRICS_MS = 10000
const RUNS_PAGE = 20

// [field, label, how to show it]
/** @type {[field: string, label: string, show?: 'time' | ((value: any) => Node | string)][]} */
const FIELDS = [
  ['reaktorDefinitionId', 'Id'], ['app', 'App'], ['state', 'State'],
  ['blocked', 'Blocked', (v) => (v ? 'yes: a run passed its timeout and is still settling' : 'no')],
  ['interval', 'Interval'], ['effectiveInterval', 'Effective interval'], ['autoStart', 'Starts with the service', (v) => (v ? 'yes' : 'no')],
  ['owner', 'Owner node'], ['runningSince', 'Run in flight since', 'time'], ['lastRun', 'Last run', 'time'],
  ['lastOutcome', 'Last outcome', (v) => (v ? outcomeBadge(v) : '—')], ['lastDurationMs', 'Last duration', formatDuration],
  ['nextRun', 'Next run', 'time'], ['lastSuccessAt', 'Last success', 'time'], ['lastFailureAt', 'Last failure', 'time'],
  ['consecutiveFailures', 'Consecutive failures', String], ['updatedAt', 'State changed', 'time'], ['lastError', 'Last error']
]

/**
 * @param {HTMLElement} container
 * @param {Record<string, string>} params the reaktor's `id`
 * @returns {() => void} the unmount
 */
export function mount (container, { id }) {
  /** @type {Loop[]} */
  const timers = []
  let gone = false
  /** @type {Status | null} */
  let status = null
  /** @type {Run[]} */
  const runs = [] // newest first, as the API answers
  /** @type {string | null | undefined} */
  let nextBefore

  const title = h('h1', null, id)
  const badges = h('span', { class: 'badges' })
  const control = runControl(id, () => { refreshStatus(); refreshRuns() })
  const fields = h('dl', { class: 'fields' })
  const description = h('p', { class: 'description' })
  const chart = h('figure', { class: 'chart' })
  const runsBody = h('tbody')
  const more = h('button', { type: 'button', class: 'secondary', hidden: true, onclick: loadMore }, 'Load more')
  const metricsBody = h('tbody')
  const metricsNote = h('p', { class: 'muted' })
  const body = h('div', { class: 'reaktor', hidden: true },
    h('div', { class: 'heading' }, title, badges, control.element),
    description,
    h('section', { class: 'card', 'aria-labelledby': 'status-h' }, h('h2', { id: 'status-h' }, 'Status'), fields),
    h('section', { class: 'card', 'aria-labelledby': 'chart-h' }, h('h2', { id: 'chart-h' }, 'Recent run durations'), chart),
    h('section', { class: 'card', 'aria-labelledby': 'runs-h' }, h('h2', { id: 'runs-h' }, 'Run history'),
      h('div', { class: 'table-wrap' }, h('table', { class: 'runs' },
        h('thead', null, h('tr', null, ['Outcome', 'Started', 'Duration', 'Node', 'Error'].map((c) => h('th', { scope: 'col' }, c)))),
        runsBody)),
      more),
    h('section', { class: 'card', 'aria-labelledby': 'metrics-h' }, h('h2', { id: 'metrics-h' }, 'Metrics'), metricsNote,
      h('div', { class: 'table-wrap' }, h('table', { class: 'metrics' },
        h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Series'), h('th', { scope: 'col' }, 'Value'))), metricsBody))))
  const loading = h('p', { class: 'muted' }, 'Loading…')
  container.append(h('p', { class: 'back' }, h('a', { href: '#/' }, '← All reaktors')), loading, body)

  /** @param {string} message */
  function notRegistered (message) {
    gone = true
    loading.replaceChildren(h('span', { role: 'alert', class: 'not-registered' }, message), ' ', h('a', { href: '#/' }, 'Back to the reaktors'))
  }

  /** @param {Status} s */
  function renderStatus (s) {
    const now = Date.now()
    status = s
    set(title, s.label ?? s.reaktorDefinitionId)
    set(description, s.description ?? '')
    description.hidden = !s.description
    badges.replaceChildren(stateBadge(s), isFailing(s) ? h('span', { class: 'badge failed' }, `⚠ failing: ${s.consecutiveFailures} in a row`) : '')
    // Each value is rewritten only when it changed, so text selected in it stays selected.
    for (const [key, label, show] of FIELDS) {
      const value = s[key]
      let shown
      if (show === 'time') shown = value ? h('span', null, formatTime(value), h('span', { class: 'muted' }, ` (${relative(value, now)})`)) : '—'
      else if (typeof show === 'function') shown = show(value)
      else shown = value === null || value === undefined || value === '' ? '—' : String(value)
      let dd = fields.querySelector(`dd[data-field="${key}"]`)
      if (!dd) {
        dd = h('dd', { dataset: { field: key } })
        fields.append(h('div', { class: key === 'lastError' ? 'wide' : undefined }, h('dt', null, label), dd))
      }
      const text = typeof shown === 'string' ? shown : shown.textContent
      if (dd.textContent !== text) dd.replaceChildren(shown)
    }
    control.update(s)
  }

  async function refreshStatus () {
    try {
      renderStatus(await api('GET', `/polling/${seg(id)}/status`))
      loading.hidden = true
      body.hidden = false
    } catch (err) {
      if (err instanceof LoginRequired) { gone = true; return }
      if (err.status === 404) return notRegistered(err.message)
      toast(`Status: ${err.message}`, true)
    }
  }

  /** @param {Run} run */
  function runRow (run) {
    return h('tr', { dataset: { run: run.runId } },
      h('td', null, outcomeBadge(run.outcome)),
      h('td', { title: run.startedAt }, formatTime(run.startedAt)),
      h('td', { dataset: { label: 'Duration' } }, formatDuration(run.durationMs)),
      h('td', { dataset: { label: 'Node' } }, run.node),
      h('td', { class: 'error' }, run.error ?? ''))
  }

  function renderRuns () {
    runsBody.replaceChildren(...(runs.length ? runs.map(runRow) : [h('tr', null, h('td', { colspan: 5, class: 'muted' }, 'No run recorded yet.'))]))
    more.hidden = !nextBefore
    const recent = runs.slice(0, 40).reverse()
    chart.replaceChildren(...durationChart(recent, outcomeKind))
  }

  /** The ids of the runs shown. */
  const shownRuns = () => new Set(runs.map((r) => r.runId))

  /** The newest page, merged in front of what is shown (older pages loaded stay). */
  async function refreshRuns () {
    try {
      /** @type {RunsPage} */
      const answer = await api('GET', `/polling/${seg(id)}/runs`, undefined, { limit: RUNS_PAGE })
      if (nextBefore === undefined) nextBefore = answer.nextBefore
      const known = shownRuns()
      const fresh = answer.runs.filter((r) => !known.has(r.runId))
      // A run shown while in flight (timed out, no duration yet) is replaced by its settled row.
      for (const r of answer.runs) {
        const i = runs.findIndex((x) => x.runId === r.runId)
        if (i >= 0) runs[i] = r
      }
      runs.unshift(...fresh)
      renderRuns()
    } catch (err) {
      if (err instanceof LoginRequired) { gone = true; return }
      if (err.status !== 404) toast(`Runs: ${err.message}`, true)
    }
  }

  async function loadMore () {
    more.disabled = true
    try {
      /** @type {RunsPage} */
      const answer = await api('GET', `/polling/${seg(id)}/runs`, undefined, { limit: RUNS_PAGE, before: nextBefore })
      const known = shownRuns()
      const older = answer.runs.filter((r) => !known.has(r.runId))
      runs.push(...older)
      nextBefore = answer.nextBefore
      renderRuns()
      // The first new row takes the focus, so the keyboard goes on from where the list grew.
      const first = older.length ? /** @type {HTMLTableCellElement | null} */ (runsBody.querySelector(`tr[data-run="${CSS.escape(older[0].runId)}"] td`)) : null
      if (first) { first.tabIndex = -1; first.focus() }
    } catch (err) {
      if (!(err instanceof LoginRequired)) toast(`Runs: ${err.message}`, true)
    }
    more.disabled = false
  }

  async function refreshMetrics () {
    try {
      const res = await fetch('/metrics', { headers: { Accept: 'text/plain' } })
      if (!res.ok) throw new Error(`/metrics answered ${res.status}`)
      const series = metricsOf(await res.text(), id)
      metricsBody.replaceChildren(...series.map((m) => h('tr', null, h('td', null, h('code', null, m.series)), h('td', null, m.value))))
      metricsNote.textContent = series.length
        ? 'Series of this reaktor on the node that answered (histogram buckets left out).'
        : 'The node that answered exports no series of this reaktor (another node may hold it).'
    } catch (err) {
      metricsNote.textContent = `Metrics could not be read: ${err.message}`
    }
  }

  /**
   * Runs `fn` now and then every `ms` while the tab is visible; one call at a time.
   * @param {number} ms
   * @param {() => Promise<void>} fn
   */
  function every (ms, fn) {
    /** @type {Loop} */
    const loop = {
      timer: undefined,
      running: false,
      run: async () => {
        clearTimeout(loop.timer)
        if (gone || loop.running) return
        loop.running = true
        await fn()
        loop.running = false
        if (!gone && document.visibilityState === 'visible') loop.timer = setTimeout(loop.run, ms)
      }
    }
    timers.push(loop)
    loop.run()
  }

  function onVisibility () {
    for (const loop of timers) {
      if (document.visibilityState === 'visible') loop.run()
      else clearTimeout(loop.timer)
    }
  }

  document.addEventListener('visibilitychange', onVisibility)
  every(STATUS_MS, refreshStatus)
  every(RUNS_MS, refreshRuns)
  every(METRICS_MS, refreshMetrics)
  // Relative times in the status move with the clock between refreshes.
  const ticker = setInterval(() => { if (status && !gone) renderStatus(status) }, 1000)

  return () => {
    gone = true
    clearInterval(ticker)
    for (const loop of timers) clearTimeout(loop.timer)
    document.removeEventListener('visibilitychange', onVisibility)
  }
}
