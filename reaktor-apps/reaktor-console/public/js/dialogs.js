// @ts-check
// Pieces the account views share: a modal confirmation, a secret shown once with a copy button,
// and an error line placed next to what failed (a toast alone would not say which row it was).
import { LoginRequired } from './api.js'
import { h, toast } from './ui.js'

/**
 * An error line (`errorLine`): `show(text)` fills it, `show(null)` empties it.
 * @typedef {HTMLParagraphElement & { show: (text: string | null) => void }} ErrorLine
 */

let dialogs = 0

/**
 * Asks in a modal `<dialog>`; resolves true when confirmed. `body` (optional) holds extra inputs the
 * caller reads after a true answer; the form's own validation applies before it can be confirmed.
 * Cancel has the focus first, since the confirmed action is usually the destructive one; Escape
 * cancels, and the focus goes back to the element that opened the dialog.
 * @param {{ title: string, text?: string, confirmLabel: string, danger?: boolean, body?: Node }} question
 * @returns {Promise<boolean>}
 */
export function confirmDialog ({ title, text, confirmLabel, danger = true, body }) {
  const opener = document.activeElement
  const id = `dialog-title-${++dialogs}`
  return new Promise((resolve) => {
    const cancel = h('button', { type: 'button', class: 'secondary' }, 'Cancel')
    const confirm = h('button', { type: 'submit', class: danger ? 'danger' : undefined, value: 'confirm' }, confirmLabel)
    const dialog = h('dialog', { class: 'confirm', 'aria-labelledby': id },
      h('form', { method: 'dialog' },
        h('h2', { id }, title),
        text ? h('p', null, text) : null,
        body,
        h('div', { class: 'actions' }, cancel, confirm)))
    cancel.addEventListener('click', () => dialog.close('cancel'))
    dialog.addEventListener('close', () => {
      dialog.remove()
      if (opener instanceof HTMLElement && opener.isConnected) opener.focus()
      resolve(dialog.returnValue === 'confirm')
    })
    document.body.append(dialog)
    dialog.showModal()
    cancel.focus()
  })
}

/**
 * A secret the API returns once (a generated password, a new API token), whole (wrapped on a phone),
 * with a Copy button and the warning that it will not be shown again. Without clipboard access
 * (another browser's permissions, a page not in a secure context) Copy selects the text for Ctrl+C.
 * @param {{ title: string, value: string, note: string, name: string }} secret `name` marks it for
 *   the tests (data-secret)
 */
export function secretBox ({ title, value, note, name }) {
  const text = h('code', { class: 'secret', tabindex: '0', 'aria-label': title, dataset: { secret: name } }, value)
  const copy = h('button', {
    type: 'button',
    class: 'secondary',
    onclick: async () => {
      try {
        await navigator.clipboard.writeText(value)
        toast('Copied to the clipboard')
      } catch {
        text.focus()
        // null only for a document no window shows, which the console never is.
        const selection = /** @type {Selection} */ (window.getSelection())
        selection.selectAllChildren(text)
        toast('Selected: press Ctrl+C (⌘C) to copy')
      }
    }
  }, 'Copy')
  return h('div', { class: 'secret-box', role: 'group', 'aria-label': title },
    h('p', { class: 'secret-title' }, title),
    h('div', { class: 'secret-row' }, text, copy),
    h('p', { class: 'secret-note' }, note))
}

/**
 * An empty error line to place next to a form or row; `show(text)` fills it, `show(null)` empties it.
 * @returns {ErrorLine}
 */
export function errorLine () {
  const el = /** @type {ErrorLine} */ (h('p', { class: 'inline-error', role: 'alert', hidden: true }))
  el.show = (text) => {
    el.textContent = text ?? ''
    el.hidden = !text
  }
  return el
}

/**
 * A labelled form field, the label tied to the input by id.
 * @param {string} label
 * @param {HTMLElement} input
 * @param {string} [hint]
 */
export function field (label, input, hint) {
  const hintEl = hint ? h('span', { class: 'hint', id: `${input.id}-hint` }, hint) : null
  if (hintEl) input.setAttribute('aria-describedby', hintEl.id)
  return h('div', { class: 'field' }, h('label', { for: input.id }, label), input, hintEl)
}

/**
 * Submits `form` through `run()` (its API call), the submit button disabled meanwhile; whatever it
 * throws shows in `error` under the form, except a 401, on which the console is already leaving
 * for the login page.
 * @param {HTMLFormElement} form
 * @param {ErrorLine} error
 * @param {() => Promise<void>} run
 */
export function onSubmit (form, error, run) {
  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    error.show(null)
    const button = /** @type {HTMLButtonElement} */ (form.querySelector('button[type="submit"]'))
    button.disabled = true
    try {
      await run()
    } catch (err) {
      if (!(err instanceof LoginRequired) && form.isConnected) error.show(err.message)
    } finally {
      button.disabled = false
    }
  })
  return form
}
