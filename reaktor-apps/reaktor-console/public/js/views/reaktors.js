// @ts-check
// The reaktors list: one page of 50 from the server (filtered, sorted and counted there), refreshed
// at most once a second while the tab is visible. Rows are kept by id and their cells rewritten in
// place, so focus, the checkbox selection and the scroll position survive every refresh.
import { api, seg, LoginRequired } from '../api.js'
import { h, toast, relative, formatTime, set } from '../ui.js'
import { outcomeBadge, stateBadge, isFailing, runControl } from './polling-common.js'

/** @typedef {import('./polling-common.js').Status} Status */
/**
 * A reaktor's row, kept by id across refreshes; `status` is the one it shows.
 * @typedef {{ tr: HTMLTableRowElement, cells: Record<string, HTMLTableCellElement>, check: HTMLInputElement, link: HTMLAnchorElement, control: ReturnType<typeof runControl>, status: Status | null }} Row
 */

const PAGE = 50
const REFRESH_MS = 1000
/** @type {[key: string, text: string][]} */
const STATES = [['all', 'All'], ['running', 'Running'], ['stopped', 'Stopped'], ['failing', 'Failing']]
// [sort key, header, hidden on a phone]; the id is shown under the label, sorted by its own button.
/** @type {[key: string, header: string, optional: boolean][]} */
const COLUMNS = [
  ['label', 'Label', false], ['app', 'App', true], ['state', 'State', false],
  ['interval', 'Interval', true], ['lastRun', 'Last run', false], ['nextRun', 'Next run', false],
  ['lastSuccessAt', 'Last success', true], ['consecutiveFailures', 'Failures', false], ['owner', 'Owner', true]
]

// Kept across visits to a reaktor and back, so the list comes back as it was left.
const view = { q: '', state: 'all', sort: 'id', order: 'asc', offset: 0 }

/** The query of the paged list API. */
function listQuery () {
  /** @type {Record<string, string | number | undefined>} */
  const query = { sort: view.sort, order: view.order, limit: PAGE, offset: view.offset, q: view.q || undefined }
  if (view.state === 'running' || view.state === 'stopped') query.state = view.state
  if (view.state === 'failing') query.failing = 'true'
  return query
}

/**
 * @param {HTMLElement} container
 * @returns {() => void} the unmount
 */
export function mount (container) {
  /** @type {Map<string, Row>} */
  const rows = new Map() // id → {tr, cells, status}
  /** @type {Set<string>} */
  const selected = new Set()
  /** @type {number | undefined} */
  let timer
  /** @type {number | undefined} */
  let ticker
  let latest = 0 // the number of the latest list request
  let gone = false
  /** @type {number | undefined} */
  let filterTimer

  const search = h('input', { type: 'search', id: 'reaktor-filter', placeholder: 'label, id or app', value: view.q, autocomplete: 'off' })
  search.addEventListener('input', () => {
    clearTimeout(filterTimer)
    filterTimer = setTimeout(() => { view.q = search.value.trim(); view.offset = 0; refresh() }, 250)
  })
  const stateButtons = STATES.map(([key, text]) => h('button', {
    type: 'button', class: 'secondary', dataset: { state: key }, 'aria-pressed': String(view.state === key),
    onclick: () => { view.state = key; view.offset = 0; refresh() }
  }, text, ' ', h('span', { class: 'count' }, '…')))
  const selectionInfo = h('span', { class: 'muted', 'aria-live': 'polite' })
  const bulkStart = h('button', { type: 'button', disabled: true, onclick: () => bulk('start') }, 'Start selected')
  const bulkStop = h('button', { type: 'button', class: 'secondary', disabled: true, onclick: () => bulk('stop') }, 'Stop selected')
  const selectAll = h('input', { type: 'checkbox', 'aria-label': 'Select every reaktor on this page', onchange: () => {
    for (const [id, row] of rows) { row.check.checked = selectAll.checked; if (selectAll.checked) selected.add(id); else selected.delete(id) }
    showSelection()
  } })
  /**
   * @param {string} key
   * @param {string} text
   */
  const sortButton = (key, text) => h('button', { type: 'button', class: 'sort', dataset: { sort: key }, onclick: () => sortBy(key) }, text, h('span', { class: 'arrow', 'aria-hidden': 'true' }))
  const headerCells = COLUMNS.map(([key, text, optional]) => h('th', { scope: 'col', class: optional ? 'opt' : undefined, dataset: { key } },
    sortButton(key, text), key === 'label' ? [' / ', sortButton('id', 'id')] : null))
  const tbody = h('tbody')
  const empty = h('p', { class: 'muted empty', hidden: true })
  const range = h('span', { class: 'range', 'aria-live': 'polite' })
  const prev = h('button', { type: 'button', class: 'secondary', disabled: true, onclick: () => { view.offset = Math.max(0, view.offset - PAGE); refresh() } }, '← Previous')
  const next = h('button', { type: 'button', class: 'secondary', disabled: true, onclick: () => { view.offset += PAGE; refresh() } }, 'Next →')

  container.append(
    h('h1', null, 'Polling reaktors'),
    h('div', { class: 'toolbar' },
      h('div', { class: 'filter' }, h('label', { for: 'reaktor-filter' }, 'Filter'), search),
      h('div', { class: 'states', role: 'group', 'aria-label': 'Show' }, stateButtons),
      h('div', { class: 'bulk' }, selectionInfo, bulkStart, bulkStop)),
    h('div', { class: 'table-wrap reaktors' },
      h('table', { class: 'reaktors' },
        h('caption', { class: 'visually-hidden' }, 'Polling reaktors; column headers sort'),
        h('thead', null, h('tr', null, h('th', { scope: 'col', class: 'select' }, selectAll), headerCells, h('th', { scope: 'col' }, 'Actions'))),
        tbody)),
    empty,
    h('nav', { class: 'pager', 'aria-label': 'Pages' }, prev, range, next))

  /** @param {string} key */
  function sortBy (key) {
    if (view.sort === key) view.order = view.order === 'asc' ? 'desc' : 'asc'
    else { view.sort = key; view.order = 'asc' }
    view.offset = 0
    refresh()
  }

  function showSelection () {
    selectionInfo.textContent = selected.size === 0 ? '' : `${selected.size} selected`
    bulkStart.disabled = bulkStop.disabled = selected.size === 0
    selectAll.checked = rows.size > 0 && [...rows.keys()].every((id) => selected.has(id))
  }

  /** @param {'start' | 'stop'} action */
  async function bulk (action) {
    const ids = [...selected]
    bulkStart.disabled = bulkStop.disabled = true
    try {
      const answer = await api('POST', `/polling/${action}`, { ids })
      const missing = answer.notFound.length ? `; not registered: ${answer.notFound.join(', ')}` : ''
      toast(`${action === 'start' ? 'Started' : 'Stopped'} ${answer.changed}, unchanged ${answer.unchanged}${missing}`, answer.notFound.length > 0)
      selected.clear()
      for (const row of rows.values()) row.check.checked = false
    } catch (err) {
      if (!(err instanceof LoginRequired)) toast(`${action === 'start' ? 'Start' : 'Stop'} selected: ${err.message}`, true)
    }
    showSelection()
    refresh()
  }

  /**
   * @param {string} id
   * @returns {Row}
   */
  function newRow (id) {
    const check = h('input', { type: 'checkbox', 'aria-label': `Select ${id}`, onchange: () => { if (check.checked) selected.add(id); else selected.delete(id); showSelection() } })
    check.checked = selected.has(id)
    const link = h('a', { href: `#/reaktor/${seg(id)}` })
    /** @type {Row['cells']} */
    const cells = {}
    for (const [key, text, optional] of COLUMNS) cells[key] = h('td', { class: optional ? 'opt' : undefined, dataset: { label: text } })
    cells.label.append(h('div', { class: 'name' }, h('span', { class: 'marker', 'aria-hidden': 'true' }), link), h('div', { class: 'id', title: id }, id))
    const control = runControl(id, () => refresh())
    const tr = h('tr', { dataset: { id } }, h('td', { class: 'select' }, check), Object.values(cells), h('td', { class: 'actions', dataset: { label: 'Actions' } }, control.element))
    return { tr, cells, check, link, control, status: null }
  }

  /**
   * @param {Row} row
   * @param {Status} s
   * @param {number} now
   */
  function fill (row, s, now) {
    const { cells } = row
    row.status = s
    const failing = isFailing(s)
    row.tr.classList.toggle('failing', failing)
    row.tr.classList.toggle('stopped', s.state === 'stopped')
    set(row.link, s.label ?? s.reaktorDefinitionId)
    // A long label is cut to a few lines in the list: the whole of it on hover (and on its page).
    if (row.link.title !== row.link.textContent) row.link.title = row.link.textContent
    set(cells.app, s.app ?? '—')
    cells.state.replaceChildren(stateBadge(s), failing ? h('span', { class: 'badge failed' }, '⚠ failing') : '')
    set(cells.interval, s.effectiveInterval)
    cells.lastRun.replaceChildren(h('span', { class: 'when', title: formatTime(s.lastRun) }, relative(s.lastRun, now)), ' ', s.lastOutcome ? outcomeBadge(s.lastOutcome) : '')
    times(row, now)
    set(cells.consecutiveFailures, String(s.consecutiveFailures))
    cells.consecutiveFailures.classList.toggle('bad', s.consecutiveFailures > 0)
    set(cells.owner, s.owner ?? '—')
    row.control.update(s)
  }

  /**
   * The cells that change with the clock alone.
   * @param {Row} row
   * @param {number} now
   */
  function times (row, now) {
    const s = row.status
    const due = s.nextRun && new Date(s.nextRun).getTime() <= now
    const nextText = s.blocked ? 'blocked' : s.state === 'stopped' ? '—' : s.runningSince ? 'running now' : due ? 'due now' : relative(s.nextRun, now)
    set(row.cells.nextRun, nextText)
    row.cells.nextRun.title = formatTime(s.nextRun)
    const when = row.cells.lastRun.querySelector('.when')
    if (when) set(when, relative(s.lastRun, now))
    set(row.cells.lastSuccessAt, relative(s.lastSuccessAt, now))
    row.cells.lastSuccessAt.title = formatTime(s.lastSuccessAt)
  }

  /**
   * @param {{ pollingReaktors: Status[], total: number, offset: number, counts?: Record<string, number> }} answer
   *   the page, as GET /polling answers it
   */
  function render (answer) {
    const now = Date.now()
    const ids = answer.pollingReaktors.map((s) => s.reaktorDefinitionId)
    const keep = new Set(ids)
    for (const [id, row] of rows) if (!keep.has(id)) { row.tr.remove(); rows.delete(id) }
    let cursor = tbody.firstChild
    for (const s of answer.pollingReaktors) {
      const id = s.reaktorDefinitionId
      let row = rows.get(id)
      if (!row) { row = newRow(id); rows.set(id, row) }
      fill(row, s, now)
      // Moved only when out of place: moving the row holding the focus would drop it.
      if (row.tr === cursor) cursor = /** @type {ChildNode} */ (cursor).nextSibling
      else tbody.insertBefore(row.tr, cursor)
    }
    for (const button of stateButtons) {
      const key = /** @type {string} */ (button.dataset.state)
      button.setAttribute('aria-pressed', String(view.state === key))
      set(/** @type {Element} */ (button.querySelector('.count')), answer.counts ? String(answer.counts[key]) : '')
    }
    for (const th of headerCells) {
      const sortButtons = /** @type {NodeListOf<HTMLButtonElement>} */ (th.querySelectorAll('button.sort'))
      const sorted = [...sortButtons].some((b) => b.dataset.sort === view.sort)
      if (sorted) th.setAttribute('aria-sort', view.order === 'asc' ? 'ascending' : 'descending')
      else th.removeAttribute('aria-sort')
      for (const b of sortButtons) {
        const on = b.dataset.sort === view.sort
        set(/** @type {Element} */ (b.querySelector('.arrow')), on ? (view.order === 'asc' ? ' ▲' : ' ▼') : '')
        b.classList.toggle('on', on)
      }
    }
    const first = answer.total === 0 ? 0 : answer.offset + 1
    const last = answer.offset + answer.pollingReaktors.length
    set(range, `${first.toLocaleString()}–${last.toLocaleString()} of ${answer.total.toLocaleString()}`)
    prev.disabled = answer.offset === 0
    next.disabled = last >= answer.total
    empty.hidden = answer.total !== 0
    set(empty, view.q || view.state !== 'all' ? 'No reaktor matches this filter.' : 'No polling reaktor is registered.')
    showSelection()
  }

  /**
   * Asks for the page now. A change made meanwhile (a filter, a sort, an action) asks again at
   * once instead of waiting for the answer in flight, whose answer is then dropped: only the
   * latest request draws and schedules the next refresh.
   */
  async function refresh () {
    clearTimeout(timer)
    timer = undefined
    if (gone) return
    const mine = ++latest
    try {
      const answer = await api('GET', '/polling', undefined, listQuery())
      if (mine !== latest || gone) return
      // The page asked for is past the end (reaktors gone, a narrower filter): show the last one.
      if (answer.total > 0 && answer.pollingReaktors.length === 0 && view.offset > 0) {
        view.offset = Math.floor((answer.total - 1) / PAGE) * PAGE
        return refresh()
      }
      render(answer)
    } catch (err) {
      if (err instanceof LoginRequired) { gone = true; return }
      if (mine !== latest) return
      toast(`Reaktors: ${err.message}`, true)
    }
    schedule()
  }

  function schedule () {
    clearTimeout(timer)
    if (!gone && document.visibilityState === 'visible') timer = setTimeout(refresh, REFRESH_MS)
  }

  function onVisibility () {
    if (document.visibilityState === 'visible') refresh()
    else { clearTimeout(timer); timer = undefined }
  }

  document.addEventListener('visibilitychange', onVisibility)
  ticker = setInterval(() => { const now = Date.now(); for (const row of rows.values()) if (row.status) times(row, now) }, 1000)
  refresh()

  return () => {
    gone = true
    clearTimeout(timer)
    clearTimeout(filterTimer)
    clearInterval(ticker)
    document.removeEventListener('visibilitychange', onVisibility)
  }
}
