// @ts-check
// Published apps (`#/apps`, `#/apps/<name>`): the list, publishing a package (the .tgz of npm
// pack), and the selected app's versions and nodes (app-details.js). Refreshed every 2 s while the
// tab is visible, so that nodes catching up on a change show it; not while a dialog is open or a
// change is under way. Only admins change anything: an operator sees the same without the controls.
import { api, LoginRequired, seg } from '../api.js'
import { confirmDialog, field, onSubmit } from '../dialogs.js'
import { formatTime, h, toast } from '../ui.js'
import { appDetails, detailedErrorLine, formatBytes } from './app-details.js'

const REFRESH_MS = 2000

/**
 * @param {HTMLElement} container
 * @param {Record<string, string>} params the selected app's `name`, if any
 * @param {import('../api.js').Answer} me the signed-in user (GET /auth/me)
 * @returns {() => void} the unmount
 */
export function mount (container, { name }, me) {
  const admin = me.role === 'admin'
  let gone = false
  let publishing = false
  let shownList = ''
  let latestList = 0
  /** @type {number | undefined} */
  let timer

  const heading = h('h1', { tabindex: '-1' }, 'Apps')
  const intro = h('p', { class: 'muted' }, 'Apps published as packages (the .tgz of ', h('code', null, 'npm pack'),
    '), stored in the database: every node runs the active version of each. Apps loaded from a folder are not listed here.')
  const listError = detailedErrorLine()
  const tbody = h('tbody')
  const table = h('div', { class: 'table-wrap', hidden: true },
    h('table', { class: 'accounts-table apps-table apps-list' },
      h('caption', { class: 'visually-hidden' }, 'Published apps'),
      h('thead', null, h('tr', null, ['App', 'Active version', 'Versions', 'Activated', 'Latest published'].map((c) => h('th', { scope: 'col' }, c)))),
      tbody))
  const empty = h('p', { class: 'muted', hidden: true }, 'No app is published yet.')
  const details = name === undefined ? null : appDetails({ name, admin, changed: reload, deleted: () => { window.location.hash = '#/apps' } })
  const pick = h('p', { class: 'muted', hidden: true }, 'Select an app to see its versions and what each node runs.')

  async function loadList () {
    // Only the latest answer draws: one asked before a change may arrive after the change's own.
    const mine = ++latestList
    try {
      const { apps } = await api('GET', '/apps')
      if (gone || mine !== latestList) return
      listError.show(null)
      const json = JSON.stringify(apps)
      if (json === shownList) return
      shownList = json
      tbody.replaceChildren(...apps.map(row))
      empty.hidden = apps.length > 0
      table.hidden = apps.length === 0
      pick.hidden = details !== null || apps.length === 0
    } catch (err) {
      if (!(err instanceof LoginRequired) && !gone && mine === latestList) listError.show(`Could not load the apps: ${err.message}`)
    }
  }

  /** @param {import('../api.js').Answer} app an app as GET /apps lists it */
  function row (app) {
    const selected = app.name === name
    return h('tr', { class: selected ? 'selected' : undefined, dataset: { app: app.name } },
      h('th', { scope: 'row', 'data-label': 'App' }, h('a', { href: `#/apps/${seg(app.name)}`, 'aria-current': selected ? 'true' : undefined }, app.name)),
      h('td', { 'data-label': 'Active version' }, app.activeVersion ?? h('span', { class: 'badge warn' }, 'none')),
      h('td', { 'data-label': 'Versions' }, String(app.versions)),
      h('td', { 'data-label': 'Activated' }, formatTime(app.changedAt), app.changedBy ? h('span', { class: 'muted' }, ` by ${app.changedBy}`) : null),
      h('td', { 'data-label': 'Latest published', class: 'time' }, formatTime(app.latestPublishedAt)))
  }

  async function reload () {
    await Promise.all([loadList(), details?.refresh()])
  }

  /** The next refresh, unless the page is gone or hidden; a dialog or a change in flight defers it. */
  function schedule () {
    clearTimeout(timer)
    if (gone || document.visibilityState !== 'visible') return
    timer = setTimeout(async () => {
      const paused = publishing || details?.busy() === true || document.querySelector('dialog[open]') !== null
      if (!paused) await reload()
      schedule()
    }, REFRESH_MS)
  }

  function onVisibility () {
    if (document.visibilityState === 'visible') reload().then(schedule)
    else clearTimeout(timer)
  }

  container.append(heading, intro, admin ? publishForm() : h('p', { class: 'card notice' }, 'Only admins publish, activate and delete apps. Your role is ', h('strong', null, me.role), '.'),
    h('h2', null, 'Published apps'), listError, empty, table, pick, details?.element ?? '')
  document.addEventListener('visibilitychange', onVisibility)
  reload().then(schedule)
  return () => {
    gone = true
    clearTimeout(timer)
    document.removeEventListener('visibilitychange', onVisibility)
  }

  /** Publishing a version: the package file, and whether every node switches to it. */
  function publishForm () {
    const file = h('input', { id: 'app-package', type: 'file', required: true, accept: '.tgz,.tar.gz,application/gzip' })
    const inactive = h('input', { id: 'app-no-activate', type: 'checkbox' })
    const error = detailedErrorLine()
    const form = h('form', { class: 'card create-form publish-form', 'aria-labelledby': 'publish-title' },
      h('h2', { id: 'publish-title' }, 'Publish a version'),
      h('div', { class: 'fields' },
        field('Package (.tgz)', file, 'The output of npm pack; it is loaded as a start would load it before it is stored'),
        h('div', { class: 'check' }, inactive, h('label', { for: inactive.id }, 'Do not activate'),
          h('span', { class: 'hint' }, '(store it only; activate it later)'))),
      h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Publish')),
      error)
    onSubmit(form, error, async () => {
      const chosen = file.files?.[0]
      if (chosen === undefined) throw new Error('Choose the package file (.tgz) to publish.')
      const activate = !inactive.checked
      if (!await confirmDialog({
        title: `Publish ${chosen.name}?`,
        text: `The package (${formatBytes(chosen.size)}) is checked and stored; ${activate ? 'every node then switches to it.' : 'no node switches to it until it is activated.'}`,
        confirmLabel: 'Publish',
        danger: false
      })) return
      publishing = true
      try {
        // The type the API takes for a package, whatever the browser guessed from the file's name.
        const body = chosen.slice(0, chosen.size, 'application/gzip')
        const answer = await api('POST', '/apps', body, { activate: activate ? undefined : 'false' })
        if (gone) return
        form.reset()
        toast(!answer.stored && !answer.activated
          ? `${answer.name}@${answer.version} was already published with these contents: nothing changed`
          : `Published ${answer.name}@${answer.version}${answer.activated ? `: every node switches to it${answer.previous ? ` from ${answer.previous}` : ''}` : ' (not active)'}`)
        const target = `#/apps/${seg(answer.name)}`
        if (window.location.hash === target) await reload()
        else window.location.hash = target
      } finally {
        publishing = false
      }
    })
    return form
  }
}
