// @ts-check
// The console shell: who is signed in, the navigation, and a hash router that mounts one view at a
// time. A view is `mount(container, params, me) → unmount`; unmount stops its timers.
import { api, LoginRequired } from './api.js'
import { toast } from './ui.js'
import * as reaktors from './views/reaktors.js'
import * as reaktor from './views/reaktor.js'
import * as users from './views/users.js'
import * as tokens from './views/tokens.js'
import * as apps from './views/apps.js'

/**
 * A view: `mount(container, params, me)` draws it into `container` for the signed-in user `me`
 * (GET /auth/me) and returns its unmount.
 * @typedef {{ mount: (container: HTMLElement, params: Record<string, string>, me: import('./api.js').Answer) => () => void }} View
 */

/**
 * `#/…` → [view, nav item, params]; unknown hashes show the reaktors.
 * @param {string} hash
 * @returns {[View, string, Record<string, string>]}
 */
function route (hash) {
  const path = hash.replace(/^#\/?/, '')
  const [head, ...rest] = path.split('/')
  if (head === 'reaktor' && rest.length > 0) return [reaktor, 'reaktors', { id: decodeSegment(rest.join('/')) }]
  if (head === 'users') return [users, 'users', {}]
  if (head === 'tokens') return [tokens, 'tokens', {}]
  // An app name may be scoped (`@scope/name`): the rest of the path, however it was encoded.
  if (head === 'apps') return [apps, 'apps', rest.join('/') === '' ? {} : { name: decodeSegment(rest.join('/')) }]
  return [reaktors, 'reaktors', {}]
}

// A link with a stray `%` (typed, cut short, or crafted) would throw here and leave a blank page:
// the id is then the text as it stands, which the reaktor page reports as not registered (the apps
// page as not published).
/** @param {string} text */
function decodeSegment (text) {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

/** @type {(() => void) | null} */
let unmount = null

/** @param {import('./api.js').Answer} me */
function show (me) {
  const [view, nav, params] = route(window.location.hash)
  if (typeof unmount === 'function') unmount()
  for (const link of /** @type {NodeListOf<HTMLElement>} */ (document.querySelectorAll('[data-nav]'))) {
    if (link.dataset.nav === nav) link.setAttribute('aria-current', 'page')
    else link.removeAttribute('aria-current')
  }
  const container = /** @type {HTMLElement} */ (document.getElementById('view'))
  container.replaceChildren()
  unmount = view.mount(container, params, me)
}

async function start () {
  let me
  try {
    me = await api('GET', '/auth/me')
  } catch (err) {
    if (!(err instanceof LoginRequired)) toast(err.message, true)
    return
  }
  const who = /** @type {HTMLElement} */ (document.getElementById('who'))
  who.textContent = `${me.username} (${me.role})`
  for (const el of /** @type {NodeListOf<HTMLElement>} */ (document.querySelectorAll('[data-admin]'))) el.hidden = me.role !== 'admin'
  window.addEventListener('hashchange', () => {
    show(me)
    const view = /** @type {HTMLElement} */ (document.getElementById('view'))
    view.focus({ preventScroll: true })
  })
  show(me)
}

start()
