import { escapeHtml } from '../lib/escape-html.js'
import type { AppPlan } from './app-plan.js'

/**
 * The `public/` of a new app (`reaktor new-app --ui`): the look of the example apps (drain-demo),
 * scripts in files only (the app UI policy blocks inline ones), the session token from the helper
 * the service injects, and a 401 leading to the login page and back.
 */
export function uiFiles (plan: AppPlan): Record<string, string> {
  return {
    'public/index.html': indexHtml(plan),
    'public/app.js': appJs(plan),
    'public/style.css': STYLE_CSS,
    // Without an icon of its own a browser asks the service for /favicon.ico, which it has not.
    'public/favicon.svg': FAVICON_SVG
  }
}

function indexHtml (plan: AppPlan): string {
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>${escapeHtml(plan.name)}</title>
  <link rel="icon" href="favicon.svg" type="image/svg+xml">
  <link rel="stylesheet" href="style.css">
  <script src="app.js" defer></script>
</head>
<body>
  <main>
    <header>
      <h1>${escapeHtml(plan.name)}</h1>
      <p class="lead">
        A new reaktor app. Edit <code>index.js</code> to change what its reaktors do, and this
        folder (<code>public/</code>) to change this page.
      </p>
    </header>

    <section class="card" aria-labelledby="hello-heading">
      <h2 id="hello-heading">Say hello</h2>
      <p class="muted">Calls the aktor <code>${escapeHtml(plan.aktorId)}</code>, which greets with the app's <code>greeting</code> setting.</p>
      <form id="hello-form" class="actions">
        <label for="name">Name</label>
        <input id="name" name="name" type="text" maxlength="100" value="Ada" required>
        <button type="submit">Say hello</button>
      </form>
      <p id="answer" class="answer" aria-live="polite"></p>
    </section>

    <section class="card" aria-labelledby="poller-heading">
      <h2 id="poller-heading">Polling reaktor</h2>
      <dl class="facts">
        <dt>Id</dt><dd><code>${escapeHtml(plan.pollingId)}</code></dd>
        <dt>State</dt><dd><span id="state" class="badge">…</span></dd>
        <dt>Interval</dt><dd id="interval">…</dd>
        <dt>Last run</dt><dd id="last-run">…</dd>
      </dl>
      <div class="actions">
        <button type="button" id="start">Start</button>
        <button type="button" id="stop">Stop</button>
      </div>
    </section>

    <p id="message" role="status" aria-live="polite"></p>
  </main>
</body>
</html>
`
}

function appJs (plan: AppPlan): string {
  return `// The ${plan.name} UI. Every API call carries the session token from window.getServiceAuthToken()
// (the service injects it into this page); a 401 or a missing token leads to the login page,
// which brings the user back here afterwards.
const AKTOR_ID = ${JSON.stringify(plan.aktorId)}
const POLLER_ID = ${JSON.stringify(plan.pollingId)}
const REFRESH_MS = 5000

const $ = (id) => document.getElementById(id)

function goToLogin () {
  const here = window.location.pathname + window.location.search
  window.location.assign('/login?redirect=' + encodeURIComponent(here))
}

class LoginRequired extends Error {}

async function api (method, path, body) {
  const token = typeof window.getServiceAuthToken === 'function' ? window.getServiceAuthToken() : null
  if (!token) {
    goToLogin()
    throw new LoginRequired('not logged in')
  }
  const headers = { 'X-Service-Token': token }
  if (body !== undefined) headers['Content-Type'] = 'application/json'
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
  if (res.status === 401) {
    goToLogin()
    throw new LoginRequired('session expired')
  }
  const data = await res.json().catch(() => null)
  if (!res.ok) throw new Error((data && data.message) || \`\${method} \${path} answered \${res.status}\`)
  return data
}

function showMessage (text, isError = false) {
  const el = $('message')
  el.textContent = text
  el.classList.toggle('error', isError)
}

function renderStatus (status) {
  const state = $('state')
  state.textContent = status.state
  state.classList.toggle('running', status.state === 'running')
  $('interval').textContent = status.interval
  $('last-run').textContent = status.lastRun ? new Date(status.lastRun).toLocaleTimeString() : 'never'
  $('start').disabled = status.state === 'running'
  $('stop').disabled = status.state !== 'running'
}

async function refresh () {
  renderStatus(await api('GET', \`/api/v1/polling/\${POLLER_ID}/status\`))
}

// Runs one action; its failure is shown, except a lost login (the page is leaving for the login form).
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
    const { message } = await api('POST', \`/api/v1/aktor/\${AKTOR_ID}\`, { name: $('name').value })
    $('answer').textContent = message
    showMessage('')
  })
})

for (const action of ['start', 'stop']) {
  $(action).addEventListener('click', () => act(async () => {
    const res = await api('POST', \`/api/v1/polling/\${POLLER_ID}/\${action}\`)
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
`
}

const FAVICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">
  <circle cx="16" cy="16" r="14" fill="#2563eb"/>
  <circle cx="16" cy="16" r="6" fill="#fff"/>
</svg>
`

const STYLE_CSS = `:root {
  color-scheme: light dark;
  --accent: #2563eb;
  --ok: #15803d;
  --idle: #6b7280;
  --error: #b91c1c;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  line-height: 1.5;
}

body { margin: 0; padding: 2rem 1rem; }
main { max-width: 40rem; margin: 0 auto; }
h1 { margin: 0 0 .25rem; }
.lead { margin-top: 0; }
code { font-size: .95em; }

.card {
  border: 1px solid color-mix(in srgb, currentColor 20%, transparent);
  border-radius: .5rem;
  padding: 1rem 1.25rem;
  margin: 1rem 0;
}
.card h2 { margin: 0 0 .75rem; font-size: 1.1rem; }

.facts { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; margin: 0 0 1rem; }
.facts dt { font-weight: 600; }
.facts dd { margin: 0; font-variant-numeric: tabular-nums; }

.badge { display: inline-block; padding: 0 .5rem; border-radius: 999px; color: #fff; background: var(--idle); }
.badge.running { background: var(--ok); }

.actions { display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; }
button {
  font: inherit; padding: .35rem .9rem; border-radius: .35rem; cursor: pointer;
  border: 1px solid var(--accent); background: var(--accent); color: #fff;
}
button:disabled { opacity: .5; cursor: default; }
input[type="text"] { font: inherit; width: 12rem; padding: .3rem .4rem; }

.answer { font-size: 1.25rem; margin: .75rem 0 0; min-height: 1.5em; }
.muted { opacity: .7; margin-top: 0; }
#message { min-height: 1.5em; }
#message.error { color: var(--error); }
`
