// @ts-check
// One published app (`#/apps/<name>`): its versions, newest first, the active one marked, and what
// each node runs of it, a node that could not switch marked with its error. An admin activates a
// version, rolls back (activates the next older one), deletes a version that is not active, or
// deletes the app; each asks first, and the API's refusal shows where it was asked.
import { api, ApiError, LoginRequired, seg } from '../api.js'
import { confirmDialog, errorLine } from '../dialogs.js'
import { formatTime, h, toast } from '../ui.js'

/**
 * An app as GET /apps/{name} answers it.
 * @typedef {import('../api.js').Answer} Details
 */
/** @typedef {import('../dialogs.js').ErrorLine} ErrorLine */

/**
 * Bytes as "850 B" / "12.4 KiB" / "3.1 MiB".
 * @param {number} n
 */
export function formatBytes (n) {
  if (n < 1024) return `${n} B`
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`
  return `${(n / 1024 / 1024).toFixed(1)} MiB`
}

/**
 * A message of several lines (a load error with its source line and caret) as its first line and
 * the rest kept as written, in a fixed-width block where the caret points at the column it names.
 * @param {string} text
 * @returns {(Node | string)[]}
 */
export function messageLines (text) {
  const [first, ...rest] = text.split('\n')
  return rest.length === 0 ? [first] : [first, h('code', { class: 'message-detail' }, rest.join('\n'))]
}

/**
 * An error line that shows a message of several lines as `messageLines` does.
 * @returns {ErrorLine}
 */
export function detailedErrorLine () {
  const line = errorLine()
  line.show = (text) => {
    line.replaceChildren(...messageLines(text ?? ''))
    line.hidden = !text
  }
  return line
}

/**
 * The details of app `name`, drawn into `element` by `refresh()` (again only when they changed, so
 * a periodic refresh keeps the focus and the errors shown). `busy()` while a change is under way.
 * @param {{ name: string, admin: boolean, changed: () => Promise<void>, deleted: () => void }} options
 *   `changed` reloads what the page shows after a change; `deleted` leaves the app's page
 * @returns {{ element: HTMLElement, refresh: () => Promise<void>, busy: () => boolean }}
 */
export function appDetails ({ name, admin, changed, deleted }) {
  let shown = ''
  let working = false
  let latest = 0
  const title = h('h2', { id: 'app-details-title', tabindex: '-1' }, name)
  const summary = h('p', { class: 'summary' })
  const actions = h('div', { class: 'row-actions app-actions' })
  const appError = detailedErrorLine()
  const versionsBody = h('tbody')
  const nodesBody = h('tbody')
  const noNodes = h('p', { class: 'muted', hidden: true }, 'No node has reported on this app yet.')
  // Kept across redraws, so that a refusal stays next to its version while the page refreshes.
  /** @type {Map<string, ErrorLine>} */
  const rowErrors = new Map()
  const versionColumns = ['Version', 'Size', 'SHA-256', 'Published', 'By', ...(admin ? ['Actions'] : [])]
  const sections = h('div', { class: 'app-sections' },
    h('h3', null, 'Versions'),
    h('div', { class: 'table-wrap' },
      h('table', { class: 'accounts-table apps-table versions-table' },
        h('caption', { class: 'visually-hidden' }, `Versions of ${name}, newest first`),
        h('thead', null, h('tr', null, versionColumns.map((c) => h('th', { scope: 'col' }, c)))),
        versionsBody)),
    h('h3', null, 'Nodes'),
    noNodes,
    h('div', { class: 'table-wrap' },
      h('table', { class: 'accounts-table apps-table nodes-table' },
        h('caption', { class: 'visually-hidden' }, `What each node runs of ${name}`),
        h('thead', null, h('tr', null, ['Node', 'Runs', 'Since', 'Error', 'Reported'].map((c) => h('th', { scope: 'col' }, c)))),
        nodesBody)))
  const element = h('section', { class: 'card app-details', 'aria-labelledby': title.id, dataset: { app: name } },
    h('div', { class: 'app-heading' }, title, actions), summary, appError, sections)

  async function refresh () {
    const mine = ++latest
    try {
      const details = await api('GET', `/apps/${seg(name)}`)
      if (mine !== latest) return
      const json = JSON.stringify(details)
      if (json !== shown) {
        shown = json
        render(details)
      }
    } catch (err) {
      if (err instanceof LoginRequired || mine !== latest) return
      shown = ''
      sections.hidden = true
      actions.replaceChildren()
      summary.textContent = ''
      appError.show(err instanceof ApiError && err.status === 404 ? err.message : `Could not load ${name}: ${err.message}`)
    }
  }

  /**
   * Runs one change: its answer is announced, the page reloaded and the focus put on the app's name
   * (the button that asked may be gone); a refusal shows in `slot`.
   * @param {ErrorLine} slot
   * @param {() => Promise<import('../api.js').Answer>} request
   * @param {(answer: import('../api.js').Answer) => string} success
   */
  async function change (slot, request, success) {
    slot.show(null)
    appError.show(null)
    working = true
    try {
      const answer = await request()
      toast(success(answer))
      await changed()
      if (title.isConnected) title.focus()
    } catch (err) {
      if (!(err instanceof LoginRequired)) slot.show(err.message)
    } finally {
      working = false
    }
  }

  /**
   * Asks, then switches every node to `version`.
   * @param {ErrorLine} slot
   * @param {string} version
   * @param {{ title: string, text: string, confirmLabel: string }} question
   */
  async function activate (slot, version, question) {
    if (!await confirmDialog({ ...question, danger: false })) return
    await change(slot, () => api('POST', `/apps/${seg(name)}/activate`, { version }),
      (a) => a.changed ? `${name}@${version} is active${a.previous ? ` (was ${a.previous})` : ''}` : `${name}@${version} was already active`)
  }

  /** @param {Details} d */
  function render (d) {
    sections.hidden = false
    const active = d.activeVersion
    const older = active === null ? undefined : d.versions[d.versions.findIndex((/** @type {Details} */ v) => v.version === active) + 1]?.version
    summary.replaceChildren(...(active === null
      ? [h('span', { class: 'badge warn' }, 'none active'), ' No version is active: no node runs this app until one is activated.']
      : ['Active: ', h('strong', null, active), `, since ${formatTime(d.changedAt)}${d.changedBy ? ` by ${d.changedBy}` : ''}. `,
          `${d.versions.length} ${d.versions.length === 1 ? 'version' : 'versions'} stored.`]))
    actions.replaceChildren(...(admin ? appActions(d, active, older) : []).filter((b) => b !== null))
    for (const version of rowErrors.keys()) if (!d.versions.some((/** @type {Details} */ v) => v.version === version)) rowErrors.delete(version)
    versionsBody.replaceChildren(...d.versions.map((/** @type {Details} */ v) => versionRow(v, active)))
    nodesBody.replaceChildren(...d.nodes.map((/** @type {Details} */ n) => nodeRow(n, active)))
    noNodes.hidden = d.nodes.length > 0
    nodesBody.closest('.table-wrap')?.toggleAttribute('hidden', d.nodes.length === 0)
  }

  /**
   * Roll back (when there is an older version than the active one) and delete the app.
   * @param {Details} d
   * @param {string | null} active
   * @param {string | undefined} older
   */
  function appActions (d, active, older) {
    const rollback = older === undefined
      ? null
      : h('button', {
        type: 'button',
        class: 'secondary',
        dataset: { action: 'rollback' },
        onclick: () => activate(appError, older, {
          title: `Roll back ${name} to ${older}?`,
          text: `Every node switches from ${active} to ${older}, the next older version. ${active} stays stored and can be activated again.`,
          confirmLabel: 'Roll back'
        })
      }, `Roll back to ${older}`)
    const remove = h('button', {
      type: 'button',
      class: 'danger',
      dataset: { action: 'delete-app' },
      onclick: async () => {
        const count = d.versions.length
        if (!await confirmDialog({
          title: `Delete the app ${name}?`,
          text: `Every node stops it and unlists its reaktors (their run history stays), and ${count === 1 ? 'its only version is' : `all ${count} versions are`} deleted. This cannot be undone.`,
          confirmLabel: 'Delete app'
        })) return
        appError.show(null)
        working = true
        try {
          const answer = await api('DELETE', `/apps/${seg(name)}`)
          toast(answer.message)
          deleted()
        } catch (err) {
          if (!(err instanceof LoginRequired)) appError.show(err.message)
        } finally {
          working = false
        }
      }
    }, 'Delete app')
    return [rollback, remove]
  }

  /**
   * @param {Details} v a version as the details list it
   * @param {string | null} active
   */
  function versionRow (v, active) {
    const isActive = v.version === active
    const slot = rowErrors.get(v.version) ?? errorLine()
    rowErrors.set(v.version, slot)
    const controls = isActive
      ? []
      : [
          h('button', {
            type: 'button',
            class: 'secondary',
            dataset: { action: 'activate' },
            onclick: () => activate(slot, v.version, {
              title: `Activate ${name}@${v.version}?`,
              text: `Every node switches to ${v.version}${active ? ` from ${active}` : ''} now: its reaktors and aktors run this version's code.`,
              confirmLabel: 'Activate'
            })
          }, 'Activate'),
          h('button', {
            type: 'button',
            class: 'danger',
            dataset: { action: 'delete' },
            onclick: async () => {
              if (!await confirmDialog({
                title: `Delete ${name}@${v.version}?`,
                text: `Its package is removed and its UI (/app-ui/${name}@${v.version}/) is no longer served. This cannot be undone.`,
                confirmLabel: 'Delete version'
              })) return
              await change(slot, () => api('DELETE', `/apps/${seg(name)}/versions/${seg(v.version)}`), (a) => a.message)
            }
          }, 'Delete')
        ]
    return h('tr', { class: isActive ? 'active' : undefined, dataset: { version: v.version } },
      h('th', { scope: 'row', 'data-label': 'Version' }, v.version, isActive ? [' ', h('span', { class: 'badge ok' }, 'active')] : null),
      h('td', { 'data-label': 'Size', title: `${formatBytes(v.unpackedSize)} unpacked, ${v.entries} entries` }, formatBytes(v.size)),
      h('td', { 'data-label': 'SHA-256' }, h('code', { class: 'sha', title: v.sha256 }, `${v.sha256.slice(0, 12)}…`)),
      h('td', { 'data-label': 'Published', class: 'time' }, formatTime(v.publishedAt)),
      h('td', { 'data-label': 'By' }, v.publishedBy ?? '—'),
      admin ? h('td', { 'data-label': 'Actions' }, controls.length > 0 ? h('div', { class: 'row-actions' }, controls) : h('span', { class: 'muted' }, 'runs now'), slot) : null)
  }

  /**
   * @param {Details} n a node's state as the details list it
   * @param {string | null} active
   */
  function nodeRow (n, active) {
    const failed = n.error !== null
    const badge = n.version !== null && n.version === active
      ? h('span', { class: 'badge ok' }, 'active')
      : failed
        ? h('span', { class: 'badge bad' }, 'not switched')
        : active !== null ? h('span', { class: 'badge warn' }, 'switching') : null
    return h('tr', { class: failed ? 'failing' : undefined, dataset: { node: n.nodeId } },
      h('th', { scope: 'row', 'data-label': 'Node' }, n.nodeId),
      h('td', { 'data-label': 'Runs' }, n.version ?? 'none', badge ? [' ', badge] : null),
      h('td', { 'data-label': 'Since', class: 'time' }, formatTime(n.since)),
      h('td', { 'data-label': 'Error', class: failed ? 'error' : undefined }, failed ? messageLines(n.error) : '—'),
      h('td', { 'data-label': 'Reported', class: 'time' }, formatTime(n.updatedAt)))
  }

  return { element, refresh, busy: () => working }
}
