// @ts-check
// The drain demo UI. Every API call carries the session token from window.getServiceAuthToken()
// (injected by the service into this page); a 401 or a missing token leads to the login page,
// which brings the user back here afterwards.
const REAKTOR_ID = 'drain-demo'
const REFRESH_MS = 1000

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

/** @param {string | null} iso */
function formatTime (iso) {
  if (!iso) return '—'
  const date = new Date(iso)
  const seconds = Math.round((date.getTime() - Date.now()) / 1000)
  const relative = seconds === 0 ? 'now' : seconds > 0 ? `in ${seconds}s` : `${-seconds}s ago`
  return `${date.toLocaleTimeString()} (${relative})`
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
 * @param {{ state: string, interval: string, effectiveInterval: string, lastRun: string | null, nextRun: string | null }} status
 *   the fields of GET /api/v1/polling/{id}/status this page shows
 */
function renderStatus (status) {
  const state = $('state')
  state.textContent = status.state
  state.classList.toggle('running', status.state === 'running')
  $('interval').textContent = status.effectiveInterval && status.effectiveInterval !== status.interval
    ? `${status.interval} (runs every ${status.effectiveInterval})`
    : status.interval
  $('last-run').textContent = formatTime(status.lastRun)
  $('next-run').textContent = status.state === 'running' ? formatTime(status.nextRun) : '— (stopped)'
  const start = /** @type {HTMLButtonElement} */ ($('start'))
  const stop = /** @type {HTMLButtonElement} */ ($('stop'))
  start.disabled = status.state === 'running'
  stop.disabled = status.state !== 'running'
}

/** @param {{ queueLength: number, processed: number, lastProcessed: { id: number, processedAt: string } | null }} queue */
function renderQueue (queue) {
  $('queue-length').textContent = String(queue.queueLength)
  $('processed').textContent = String(queue.processed)
  $('last-processed').textContent = queue.lastProcessed
    ? `Last processed: item #${queue.lastProcessed.id} at ${new Date(queue.lastProcessed.processedAt).toLocaleTimeString()}`
    : 'Nothing processed yet.'
}

async function refresh () {
  const [status, queue] = await Promise.all([
    api('GET', `/api/v1/polling/${REAKTOR_ID}/status`),
    api('POST', '/api/v1/aktor/drain-demo-queue', {})
  ])
  renderStatus(status)
  renderQueue(queue)
}

/** @param {() => Promise<void>} fn */
async function act (fn) {
  try {
    await fn()
    await refresh()
  } catch (err) {
    if (!(err instanceof LoginRequired)) showMessage(err.message, true)
  }
}

$('start').addEventListener('click', () => act(async () => {
  const res = await api('POST', `/api/v1/polling/${REAKTOR_ID}/start`)
  showMessage(res.message)
}))

$('stop').addEventListener('click', () => act(async () => {
  const res = await api('POST', `/api/v1/polling/${REAKTOR_ID}/stop`)
  showMessage(res.message)
}))

$('enqueue-form').addEventListener('submit', (event) => {
  event.preventDefault()
  const count = Number(/** @type {HTMLInputElement} */ ($('count')).value)
  act(async () => {
    const res = await api('POST', '/api/v1/aktor/drain-demo-enqueue', { count })
    showMessage(`Added ${res.added} items; ${res.queueLength} queued.`)
  })
})

// Keep the page live; a failed refresh shows its reason and the next one tries again.
async function loop () {
  try {
    await refresh()
  } catch (err) {
    if (err instanceof LoginRequired) return
    showMessage(err.message, true)
  }
  setTimeout(loop, REFRESH_MS)
}
loop()
