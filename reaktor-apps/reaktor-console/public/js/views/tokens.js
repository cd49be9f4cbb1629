// @ts-check
// API tokens (an admin sees everyone's with the owner, an operator their own): create one, shown
// once; revoke one. And "My account": the signed-in user's own password.
import { api, ApiError, goToLogin, LoginRequired, seg } from '../api.js'
import { confirmDialog, errorLine, field, onSubmit, secretBox } from '../dialogs.js'
import { formatTime, h, toast } from '../ui.js'

const EXPIRY = [['90d', '90 days'], ['30d', '30 days'], ['365d', '1 year'], ['', 'Never'], ['custom', 'Custom…']]
/** What the API takes as `expiresIn` (an integer and a unit), checked here to say so at once. */
const DURATION = /^[0-9]+(m|h|d)$/

/**
 * An API token as GET /tokens lists it.
 * @typedef {import('../api.js').Answer} Token
 */

/**
 * @param {HTMLElement} container
 * @param {Record<string, string>} _params
 * @param {import('../api.js').Answer} me the signed-in user (GET /auth/me)
 * @returns {() => void} the unmount
 */
export function mount (container, _params, me) {
  let active = true
  const admin = me.role === 'admin'
  const heading = h('h1', { tabindex: '-1' }, 'API tokens')
  const intro = h('p', { class: 'muted' }, 'A script uses an API token instead of a login: it acts as you, with your role, until it expires or is revoked.')
  const created = h('div', { class: 'secrets', 'aria-live': 'polite' })
  const listError = errorLine()
  const tbody = h('tbody')
  const columns = ['Name', ...(admin ? ['Owner'] : []), 'Created', 'Last used', 'Expires', 'Actions']
  const table = h('div', { class: 'table-wrap' },
    h('table', { class: 'accounts-table tokens-table' },
      h('caption', { class: 'visually-hidden' }, 'API tokens'),
      h('thead', null, h('tr', null, columns.map((c) => h('th', { scope: 'col' }, c)))),
      tbody))
  const empty = h('p', { class: 'muted', hidden: true }, admin ? 'No API tokens yet.' : 'You have no API tokens yet.')

  async function load () {
    try {
      const { tokens } = await api('GET', '/tokens')
      if (!active) return
      listError.show(null)
      tbody.replaceChildren(...tokens.map(row))
      empty.hidden = tokens.length > 0
      table.hidden = tokens.length === 0
    } catch (err) {
      if (!(err instanceof LoginRequired) && active) listError.show(`Could not load the tokens: ${err.message}`)
    }
  }

  /** @param {Token} token */
  function row (token) {
    const slot = errorLine()
    const expired = token.expiresAt !== null && new Date(token.expiresAt).getTime() <= Date.now()
    const revoke = h('button', {
      type: 'button',
      class: 'danger',
      onclick: async () => {
        if (!await confirmDialog({
          title: `Revoke "${token.name}"?`,
          text: `Scripts using it${admin && token.owner !== me.username ? ` (owner ${token.owner})` : ''} are refused from now on. This cannot be undone.`,
          confirmLabel: 'Revoke'
        })) return
        slot.show(null)
        try {
          await api('DELETE', `/tokens/${seg(token.id)}`)
          if (!active) return
          toast(`Token "${token.name}" revoked`)
          await load()
          heading.focus()
        } catch (err) {
          if (!(err instanceof LoginRequired) && active) slot.show(err instanceof ApiError ? err.message : `Failed: ${err.message}`)
        }
      }
    }, 'Revoke')
    return h('tr', { dataset: { tokenId: token.id } },
      h('th', { scope: 'row', 'data-label': 'Name' }, token.name),
      admin ? h('td', { 'data-label': 'Owner' }, token.owner) : null,
      h('td', { 'data-label': 'Created' }, formatTime(token.createdAt)),
      h('td', { 'data-label': 'Last used' }, token.lastUsedAt ? formatTime(token.lastUsedAt) : 'never'),
      h('td', { 'data-label': 'Expires' }, token.expiresAt ? formatTime(token.expiresAt) : 'never', expired ? [' ', h('span', { class: 'badge bad' }, 'expired')] : null),
      h('td', { 'data-label': 'Actions' }, revoke, slot))
  }

  // Creating a token.
  const name = h('input', { id: 'token-name', required: true, maxLength: 100, autocomplete: 'off', placeholder: 'nightly export' })
  const expiry = h('select', { id: 'token-expiry' }, EXPIRY.map(([value, label]) => h('option', { value }, label)))
  const custom = h('input', { id: 'token-custom', maxLength: 20, pattern: DURATION.source, placeholder: '12h', autocomplete: 'off' })
  const customField = field('Lifetime', custom, 'A number and m, h or d (minutes, hours, days): 1m to 3650d')
  customField.hidden = true
  expiry.addEventListener('change', () => {
    customField.hidden = expiry.value !== 'custom'
    custom.required = expiry.value === 'custom'
    if (!customField.hidden) custom.focus()
  })
  const createError = errorLine()
  const form = h('form', { class: 'card create-form', 'aria-labelledby': 'create-token-title' },
    h('h2', { id: 'create-token-title' }, 'Create a token'),
    h('div', { class: 'fields' }, field('Name', name, 'What it is for, e.g. the script using it'), field('Expires in', expiry), customField),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Create token')),
    createError)
  onSubmit(form, createError, async () => {
    /** @type {{ name: string, expiresIn?: string }} */
    const body = { name: name.value.trim() }
    const expiresIn = expiry.value === 'custom' ? custom.value.trim() : expiry.value
    if (expiresIn !== '') body.expiresIn = expiresIn
    const answer = await api('POST', '/tokens', body)
    if (!active) return
    created.replaceChildren(secretBox({
      title: `New API token "${answer.name}"`,
      value: answer.token,
      name: 'token',
      note: `Copy it now: it will not be shown again. Send it as the X-Service-Token header. ${answer.expiresAt ? `It expires ${formatTime(answer.expiresAt)}.` : 'It never expires.'}`
    }))
    form.reset()
    customField.hidden = true
    custom.required = false
    toast(`Token "${answer.name}" created`)
    await load()
    const secret = /** @type {HTMLElement | null} */ (created.querySelector('.secret'))
    secret?.focus()
  })

  container.append(heading, intro, form, created, h('h2', null, admin ? 'All API tokens' : 'Your API tokens'), listError, empty, table, passwordForm(me))
  load()
  return () => { active = false }
}

/**
 * "My account": the own password. A change ends every session of the user, this one too.
 * @param {import('../api.js').Answer} me the signed-in user (GET /auth/me)
 */
function passwordForm (me) {
  const current = h('input', { id: 'current-password', type: 'password', required: true, autocomplete: 'current-password' })
  const next = h('input', { id: 'new-own-password', type: 'password', required: true, minLength: 12, maxLength: 1024, autocomplete: 'new-password' })
  const repeat = h('input', { id: 'repeat-password', type: 'password', required: true, autocomplete: 'new-password' })
  const error = errorLine()
  const form = h('form', { class: 'card account', 'aria-labelledby': 'my-account-title' },
    h('h2', { id: 'my-account-title' }, 'My account'),
    h('p', { class: 'muted' }, `Signed in as ${me.username} (${me.role}). Changing your password signs you out everywhere and ends your API tokens.`),
    h('div', { class: 'fields' },
      h('input', { type: 'text', hidden: true, autocomplete: 'username', value: me.username, readOnly: true }),
      field('Current password', current),
      field('New password', next, '12 characters or more'),
      field('Repeat the new password', repeat)),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Change password')),
    error)
  onSubmit(form, error, async () => {
    if (next.value !== repeat.value) {
      repeat.focus()
      throw new Error('The new password and its repetition differ.')
    }
    try {
      await api('POST', '/auth/password', { currentPassword: current.value, newPassword: next.value })
    } catch (err) {
      if (err instanceof ApiError && err.status === 403) throw new Error('The current password is wrong.', { cause: err })
      throw err
    }
    // The change ended this session too: sign in again with the new password, back to this view.
    toast('Password changed: sign in again with the new one')
    goToLogin()
  })
  return form
}
