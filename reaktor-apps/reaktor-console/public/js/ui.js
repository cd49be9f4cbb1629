// @ts-check
// Small DOM helpers shared by the views: no framework, no inline scripts (the app CSP allows none).

/**
 * What `h` takes as children: nodes, and text (null, undefined and false are left out); one level
 * of arrays is spread.
 * @typedef {Node | string | number | boolean | null | undefined} Child
 */

/**
 * `h('button', {type: 'button', onclick}, 'Start')`: an element with properties/attributes and children.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, any> | null} [props] `on…` functions are listeners, `class` and `dataset` as
 *   named, other non-strings properties, strings attributes (true an empty one; null, undefined,
 *   false none)
 * @param {...(Child | Child[])} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h (tag, props, ...children) {
  const el = document.createElement(tag)
  for (const [key, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null || value === false) continue
    if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value)
    else if (key === 'class') el.className = value
    else if (key === 'dataset') Object.assign(el.dataset, value)
    else if (key in el && typeof value !== 'string') /** @type {Record<string, unknown>} */ (el)[key] = value
    else el.setAttribute(key, value === true ? '' : String(value))
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue
    el.append(child instanceof Node ? child : String(child))
  }
  return el
}

/**
 * Sets an element's text only when it changed (no needless layout, no announcement).
 * @param {Node} el
 * @param {string} text
 */
export function set (el, text) {
  if (el.textContent !== text) el.textContent = text
}

/**
 * A short line in the status area (announced to screen readers); errors stay until the next one.
 * @param {string} text
 * @param {boolean} [isError]
 */
export function toast (text, isError = false) {
  const el = /** @type {HTMLElement} */ (document.getElementById('toast'))
  el.textContent = text
  el.classList.toggle('error', isError)
  el.classList.add('shown')
  clearTimeout(toast.timer)
  if (!isError) toast.timer = setTimeout(() => el.classList.remove('shown'), 4000)
}
/**
 * The timer that takes the last toast away (none for an error).
 * @type {number | undefined}
 */
toast.timer = undefined

/**
 * `2026-11-25T10:00:00Z` → local date and time; null → an em dash.
 * @param {string | null | undefined} iso
 */
export function formatTime (iso) {
  if (!iso) return '—'
  return new Date(iso).toLocaleString()
}

/**
 * Seconds from now as "in 4s" / "12s ago" / "3m ago"; null → an em dash.
 * @param {string | null | undefined} iso
 * @param {number} [now] milliseconds since the epoch
 */
export function relative (iso, now = Date.now()) {
  if (!iso) return '—'
  const seconds = Math.round((new Date(iso).getTime() - now) / 1000)
  const abs = Math.abs(seconds)
  const text = abs < 60 ? `${abs}s` : abs < 3600 ? `${Math.floor(abs / 60)}m ${abs % 60}s` : abs < 86400 ? `${Math.floor(abs / 3600)}h ${Math.floor((abs % 3600) / 60)}m` : `${Math.floor(abs / 86400)}d`
  return seconds === 0 ? 'now' : seconds > 0 ? `in ${text}` : `${text} ago`
}

/**
 * Milliseconds as "850 ms" / "2.4 s"; null → an em dash.
 * @param {number | null | undefined} ms
 */
export function formatDuration (ms) {
  if (ms === null || ms === undefined) return '—'
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 1 : 0)} s`
}
