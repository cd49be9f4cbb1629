// @ts-check
// What the reaktors list and the reaktor page show alike: state and outcome badges, and the
// start/stop and run-now buttons of one reaktor.
import { api, seg, LoginRequired } from '../api.js'
import { h, toast } from '../ui.js'

/**
 * A polling reaktor's status, as GET /polling and GET /polling/{id}/status answer it.
 * @typedef {import('../api.js').Answer} Status
 */

/** @type {Record<string, [kind: string, text: string]>} */
const OUTCOME = {
  more_work: ['ok', 'more work'], no_work: ['ok', 'no work'], failed: ['failed', 'failed'],
  timed_out: ['failed', 'timed out'], aborted: ['warn', 'aborted']
}

/**
 * A reaktor is failing while its latest runs failed (a success resets the count).
 * @param {Status} s
 * @returns {boolean}
 */
export const isFailing = (s) => s.consecutiveFailures > 0

/** @param {Status} s */
export function stateBadge (s) {
  return h('span', { class: `badge state ${s.state}` }, s.blocked ? `${s.state}, blocked` : s.state)
}

/** @param {string} outcome */
export function outcomeBadge (outcome) {
  const [kind, text] = OUTCOME[outcome] ?? ['', outcome]
  return h('span', { class: `badge outcome ${kind}`, dataset: { outcome } }, text)
}

/**
 * A run outcome's colour class (`ok`, `failed`, `warn`), for the duration chart.
 * @param {string} outcome
 */
export const outcomeKind = (outcome) => (OUTCOME[outcome] ?? ['other'])[0]

/**
 * Start/stop (one button that follows the state, so the focus stays on it) and run now.
 * `update(status)` redraws them; `changed()` is called after every action, done or refused.
 * @param {string} id
 * @param {() => void} changed
 */
export function runControl (id, changed) {
  const toggle = h('button', { type: 'button', class: 'secondary', dataset: { action: 'toggle' } })
  const runNow = h('button', { type: 'button', class: 'secondary', dataset: { action: 'run' } }, 'Run now')
  /** @type {string | null} */
  let state = null
  let busy = false

  /** @param {'start' | 'stop' | 'run'} action */
  async function act (action) {
    if (busy) return
    busy = true
    toggle.disabled = runNow.disabled = true
    try {
      const answer = await api('POST', `/polling/${seg(id)}/${action}`)
      toast(answer.message)
    } catch (err) {
      if (err instanceof LoginRequired) return
      toast(err.message, true)
    } finally {
      busy = false
      toggle.disabled = false
      runNow.disabled = state !== 'running'
    }
    changed()
  }
  toggle.addEventListener('click', () => act(state === 'running' ? 'stop' : 'start'))
  runNow.addEventListener('click', () => act('run'))

  return {
    element: h('span', { class: 'controls' }, toggle, runNow),
    /** @param {Status} s */
    update (s) {
      state = s.state
      const text = s.state === 'running' ? 'Stop' : 'Start'
      if (toggle.textContent !== text) toggle.textContent = text
      toggle.setAttribute('aria-label', `${text} ${s.label ?? id}`)
      runNow.setAttribute('aria-label', `Run ${s.label ?? id} now`)
      if (!busy) runNow.disabled = s.state !== 'running'
      runNow.title = s.state === 'running' ? '' : 'Start it first'
    }
  }
}
