// @ts-check
// Users (admins only): list, create, change role, disable/enable, reset password, delete. Each
// API error shows next to the form or the row it came from; generated passwords are shown once.
import { api, ApiError, LoginRequired, seg } from '../api.js'
import { confirmDialog, errorLine, field, onSubmit, secretBox } from '../dialogs.js'
import { formatTime, h, toast } from '../ui.js'

/**
 * A user as GET /users lists it.
 * @typedef {import('../api.js').Answer} User
 */

const ROLES = ['operator', 'admin']

/**
 * @param {HTMLElement} container
 * @param {Record<string, string>} _params
 * @param {import('../api.js').Answer} me the signed-in user (GET /auth/me)
 * @returns {() => void} the unmount
 */
export function mount (container, _params, me) {
  const heading = h('h1', { tabindex: '-1' }, 'Users')
  if (me.role !== 'admin') {
    // The API would answer 403 anyway; an operator who types the hash gets a plain sentence.
    container.append(heading, h('p', { class: 'card notice' }, 'Only admins manage users. Your role is ', h('strong', null, me.role), '.'))
    return () => {}
  }
  let active = true
  const secrets = h('div', { class: 'secrets', 'aria-live': 'polite' })
  const listError = errorLine()
  const tbody = h('tbody')
  const table = h('div', { class: 'table-wrap' },
    h('table', { class: 'accounts-table users-table' },
      h('caption', { class: 'visually-hidden' }, 'Users'),
      h('thead', null, h('tr', null, ['Username', 'Role', 'Status', 'Created', 'Last change', 'Actions'].map((c) => h('th', { scope: 'col' }, c)))),
      tbody))

  /**
   * Shows a password the API returned once, above the list, replacing an earlier one; none (a typed
   * password, not shown) removes the earlier one, which is no longer the password.
   * @param {string} title
   * @param {string | undefined} value
   */
  function showSecret (title, value) {
    if (value) secrets.replaceChildren(secretBox({ title, value, name: 'password', note: 'Copy it now: it will not be shown again. Hand it over on a safe channel.' }))
    else secrets.replaceChildren()
  }

  async function load () {
    try {
      const { users } = await api('GET', '/users')
      if (!active) return
      listError.show(null)
      tbody.replaceChildren(...users.map(row))
    } catch (err) {
      if (!(err instanceof LoginRequired) && active) listError.show(`Could not load the users: ${err.message}`)
    }
  }

  /**
   * Runs a change of one user; the row is redrawn from the answer, the error shown in the row.
   * @param {HTMLTableRowElement} tr
   * @param {string} action the data-action of the control that asked, which has the focus again
   * @param {() => Promise<{ user?: User } | undefined>} request
   * @param {string} success
   */
  async function change (tr, action, request, success) {
    const slot = /** @type {import('../dialogs.js').ErrorLine} */ (tr.querySelector('.inline-error'))
    slot.show(null)
    try {
      const answer = await request()
      if (!active) return
      if (answer?.user) {
        const next = row(answer.user)
        tr.replaceWith(next)
        const control = /** @type {HTMLElement | null} */ (next.querySelector(`[data-action="${action}"]`))
        control?.focus()
      } else {
        await load()
        heading.focus()
      }
      toast(success)
    } catch (err) {
      if (err instanceof LoginRequired || !active) return
      slot.show(err instanceof ApiError ? err.message : `Failed: ${err.message}`)
    }
  }

  /**
   * @param {User} user
   * @returns {HTMLTableRowElement}
   */
  function row (user) {
    const tr = h('tr', { dataset: { username: user.username } })
    const who = user.username === me.username ? ' (you)' : ''
    /**
     * A PATCH of this user, its answer (the user) as `change` redraws the row from.
     * @param {Record<string, unknown>} body
     */
    const patch = (body) => () => api('PATCH', `/users/${seg(user.username)}`, body).then((u) => ({ user: u }))
    const role = h('select', {
      'aria-label': `Role of ${user.username}`,
      dataset: { action: 'role' },
      onchange: () => change(tr, 'role', patch({ role: role.value }), `${user.username} is now ${role.value === 'admin' ? 'an admin' : 'an operator'}`)
        .then(() => { if (role.isConnected) role.value = user.role })
    }, ROLES.map((r) => h('option', { value: r, selected: r === user.role }, r)))
    const toggle = h('button', {
      type: 'button',
      class: user.disabled ? 'secondary' : 'danger',
      dataset: { action: 'toggle' },
      onclick: async () => {
        const disabling = !user.disabled
        if (disabling && !await confirmDialog({
          title: `Disable ${user.username}?`,
          text: 'They can no longer sign in, and every session and API token of theirs ends now. Enabling them again does not bring those back.',
          confirmLabel: 'Disable'
        })) return
        await change(tr, 'toggle', patch({ disabled: disabling }), `${user.username} ${disabling ? 'disabled' : 'enabled'}`)
      }
    }, user.disabled ? 'Enable' : 'Disable')
    const reset = h('button', { type: 'button', class: 'secondary', dataset: { action: 'reset' }, onclick: () => resetPassword(tr, user) }, 'Reset password')
    const remove = h('button', {
      type: 'button',
      class: 'danger',
      dataset: { action: 'delete' },
      onclick: async () => {
        if (!await confirmDialog({
          title: `Delete ${user.username}?`,
          text: 'The user, their sessions and their API tokens are removed. This cannot be undone.',
          confirmLabel: 'Delete'
        })) return
        await change(tr, 'delete', () => api('DELETE', `/users/${seg(user.username)}`), `${user.username} deleted`)
      }
    }, 'Delete')
    tr.append(
      h('th', { scope: 'row', 'data-label': 'Username' }, user.username, who ? h('span', { class: 'muted' }, who) : null),
      h('td', { 'data-label': 'Role' }, role),
      h('td', { 'data-label': 'Status' }, h('span', { class: `badge ${user.disabled ? 'bad' : 'ok'}` }, user.disabled ? 'disabled' : 'enabled')),
      h('td', { 'data-label': 'Created' }, formatTime(user.createdAt)),
      h('td', { 'data-label': 'Last change' }, formatTime(user.updatedAt)),
      h('td', { 'data-label': 'Actions' }, h('div', { class: 'row-actions' }, toggle, reset, remove), errorLine()))
    return tr
  }

  /**
   * @param {HTMLTableRowElement} tr
   * @param {User} user
   */
  async function resetPassword (tr, user) {
    const id = `reset-${Math.random().toString(36).slice(2)}`
    const generated = h('input', { type: 'radio', name: id, id: `${id}-gen`, value: 'generated', checked: true })
    const typed = h('input', { type: 'radio', name: id, id: `${id}-typed`, value: 'typed' })
    const password = h('input', { type: 'password', id: `${id}-pw`, minLength: 12, maxLength: 1024, autocomplete: 'new-password', disabled: true })
    const sync = () => {
      password.disabled = !typed.checked
      password.required = typed.checked
      if (typed.checked) password.focus()
    }
    generated.addEventListener('change', sync)
    typed.addEventListener('change', sync)
    const body = h('fieldset', { class: 'choice' },
      h('legend', null, 'New password'),
      h('div', null, generated, h('label', { for: generated.id }, 'Generate one (shown once)')),
      h('div', null, typed, h('label', { for: typed.id }, 'Type one')),
      field('Password (12 characters or more)', password))
    if (!await confirmDialog({
      title: `Reset the password of ${user.username}?`,
      text: 'Every session and API token of theirs ends now.',
      confirmLabel: 'Reset password',
      body
    })) return
    const payload = typed.checked ? { password: password.value } : {}
    await change(tr, 'reset', async () => {
      const answer = await api('POST', `/users/${seg(user.username)}/password`, payload)
      showSecret(`New password of ${user.username}`, answer.password)
      return answer
    }, `Password of ${user.username} reset`)
  }

  // Creating a user.
  const username = h('input', { id: 'new-username', required: true, maxLength: 64, autocomplete: 'off' })
  const role = h('select', { id: 'new-role' }, ROLES.map((r) => h('option', { value: r }, r)))
  const password = h('input', { id: 'new-password', type: 'password', minLength: 12, maxLength: 1024, autocomplete: 'new-password' })
  const createError = errorLine()
  const form = h('form', { class: 'card create-form', 'aria-labelledby': 'create-user-title' },
    h('h2', { id: 'create-user-title' }, 'Create a user'),
    h('div', { class: 'fields' },
      field('Username', username),
      field('Role', role),
      field('Password', password, 'Optional: left empty, one is generated and shown once')),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Create user')),
    createError)
  onSubmit(form, createError, async () => {
    /** @type {{ username: string, role: string, password?: string }} */
    const body = { username: username.value, role: role.value }
    if (password.value !== '') body.password = password.value
    const answer = await api('POST', '/users', body)
    if (!active) return
    showSecret(`Password of ${answer.user.username}`, answer.password)
    form.reset()
    toast(`User ${answer.user.username} created`)
    await load()
  })

  container.append(heading, form, secrets, h('h2', null, 'All users'), listError, table)
  load()
  return () => { active = false }
}
