// @ts-check
// The {{name}} UI. Every API call carries the session token from window.getServiceAuthToken()
// (the service injects it into this page); a 401 or a missing token leads to the login page,
// which brings the user back here afterwards.
const AKTOR_ID = "{{aktorId}}"
const POLLER_ID = "{{pollingId}}"
const REFRESH_MS = 5000

/**
 * The element with this id, which the page has: the script names only its own.
 * @param {string} id
 */
const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id))

function goToLogin () {
  const here = window.location.pathname + window.location.search + window.location.hash
  window.location.assign('/login?redirect=' + encodeURIComponent(here))
}

class LoginRequired extends Error {}

/**
 * The API's answer to a call with the session token, its JSON parsed; an Error with the service's
 * message when it refuses. Without a session, off to the login page (LoginRequired).
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body] sent as JSON
 * @returns {Promise<any>}
 */
async function api (method, path, body) {
  const token = typeof window.getServiceAuthToken === 'function' ? window.getServiceAuthToken() : null
  if (!token) {
    goToLogin()
    throw new LoginRequired('not logged in')
  }
  /** @type {Record<string, string>} */
  const headers = { 'X-Service-Token': token }
  if (body !== undefined) headers['Content-Type'] = 'application/json'
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
  if (res.status === 401) {
    goToLogin()
    throw new LoginRequired('session expired')
  }
  const data = await res.json().catch(() => null)
  if (!res.ok) throw new Error((data && data.message) || `${method} ${path} answered ${res.status}`)
  return data
}

/**
 * @param {string} text
 * @param {boolean} [isError]
 */
function showMessage (text, isError = false) {
  const el = $('message')
  el.textContent = text
  el.classList.toggle('error', isError)
}

/**
 * @param {{ state: string, interval: string, lastRun: string | null }} status the fields of
 *   GET /api/v1/polling/{id}/status this page shows
 */
function renderStatus (status) {
  const state = $('state')
  state.textContent = status.state
  state.classList.toggle('running', status.state === 'running')
  $('interval').textContent = status.interval
  $('last-run').textContent = status.lastRun ? new Date(status.lastRun).toLocaleTimeString() : 'never'
  const start = /** @type {HTMLButtonElement} */ ($('start'))
  const stop = /** @type {HTMLButtonElement} */ ($('stop'))
  start.disabled = status.state === 'running'
  stop.disabled = status.state !== 'running'
}

async function refresh () {
  renderStatus(await api('GET', `/api/v1/polling/${POLLER_ID}/status`))
}

/**
 * Runs one action; its failure is shown, except a lost login (the page is leaving for the login form).
 * @param {() => Promise<void>} fn
 */
async function act (fn) {
  try {
    await fn()
  } catch (err) {
    if (!(err instanceof LoginRequired)) showMessage(err.message, true)
  }
}

$('hello-form').addEventListener('submit', (event) => {
  event.preventDefault()
  act(async () => {
    const { message } = await api('POST', `/api/v1/aktor/${AKTOR_ID}`, { name: /** @type {HTMLInputElement} */ ($('name')).value })
    $('answer').textContent = message
    showMessage('')
  })
})

for (const action of ['start', 'stop']) {
  $(action).addEventListener('click', () => act(async () => {
    const res = await api('POST', `/api/v1/polling/${POLLER_ID}/${action}`)
    showMessage(res.message)
    await refresh()
  }))
}

// Keep the status live; a failed refresh shows its reason until one succeeds again (a message
// of an action meanwhile is left alone).
let refreshFailed = false
async function loop () {
  try {
    await refresh()
    if (refreshFailed) showMessage('')
    refreshFailed = false
  } catch (err) {
    if (err instanceof LoginRequired) return
    showMessage(err.message, true)
    refreshFailed = true
  }
  setTimeout(loop, REFRESH_MS)
}
loop()
