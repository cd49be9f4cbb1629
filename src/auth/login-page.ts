import { createHash } from 'node:crypto'
import { escapeHtml } from '../lib/escape-html.js'

/**
 * The login page: one self-contained HTML document (one small script, no external resources), served
 * with its own strict CSP that allows exactly its inline stylesheet and script (by hash) and posting
 * the form to this origin.
 */
const STYLE = `
*{box-sizing:border-box}
body{margin:0;min-height:100vh;display:flex;align-items:center;justify-content:center;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:#f4f5f7;color:#1d2330}
main{width:100%;max-width:22rem;margin:1rem;padding:2rem;background:#fff;border-radius:8px;box-shadow:0 1px 4px rgba(0,0,0,.15)}
h1{margin:0 0 1.25rem;font-size:1.5rem}
label{display:block;margin:.75rem 0 .25rem;font-weight:600}
input[type=text],input[type=password]{width:100%;padding:.5rem .625rem;font:inherit;border:1px solid #8a93a6;border-radius:4px}
input:focus,button:focus{outline:3px solid #2f6fde;outline-offset:1px}
button{margin-top:1.25rem;width:100%;padding:.625rem;font:inherit;font-weight:600;color:#fff;background:#2456b8;border:0;border-radius:4px;cursor:pointer}
button:hover{background:#1b4597}
.error{margin:0 0 1rem;padding:.5rem .75rem;color:#8a1020;background:#fdecee;border:1px solid #e3a0a8;border-radius:4px}
ul{padding-left:1.25rem}li{margin:.25rem 0}a{color:#2456b8}
.sign-out button{width:auto;padding:.375rem .875rem;color:#2456b8;background:#fff;border:1px solid #2456b8}
.sign-out button:hover{background:#eef3fc}
main.home{max-width:36rem}
h2{margin:1.5rem 0 .5rem;font-size:1.125rem}
a.console{display:block;margin:1.25rem 0 .25rem;padding:.75rem 1rem;font-size:1.125rem;font-weight:600;text-align:center;text-decoration:none;color:#fff;background:#2456b8;border-radius:6px}
a.console:hover{background:#1b4597}
a.console:focus{outline:3px solid #2f6fde;outline-offset:2px}
.hint{margin:.25rem 0 0;color:#4a5366;font-size:.875rem;text-align:center}
@media (prefers-color-scheme:dark){body{background:#15181e;color:#e4e7ee}main{background:#1f232b;box-shadow:none}a{color:#8db4ff}.hint{color:#a9b1c2}.sign-out button{background:#1f232b;color:#8db4ff;border-color:#8db4ff}}
`

const STYLE_HASH = `'sha256-${createHash('sha256').update(STYLE).digest('base64')}'`

/**
 * The one script of the login page. A link into an app UI's view (`…/#/tokens`) reaches this page
 * through a redirect that keeps the `#…` in the address bar, but the server never sees it, so the
 * redirect field lacks it and the form post would lose it: this puts it back.
 */
const KEEP_FRAGMENT = "(function(){var f=document.querySelector('input[name=redirect]');if(f&&location.hash.length>1&&f.value.indexOf('#')<0)f.value+=location.hash})()"

const KEEP_FRAGMENT_HASH = `'sha256-${createHash('sha256').update(KEEP_FRAGMENT).digest('base64')}'`

/** The Content-Security-Policy of the login page (and the home page: the same hashes, no script of its own). */
export const LOGIN_PAGE_CSP = [
  "default-src 'none'",
  `style-src ${STYLE_HASH}`,
  `script-src ${KEEP_FRAGMENT_HASH}`,
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'"
].join('; ')

/** Headers sent with the login page (besides the CSP). */
export const LOGIN_PAGE_HEADERS: Record<string, string> = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy': LOGIN_PAGE_CSP,
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  // The redirect target in the query string is nobody else's business. Not `no-referrer`: with it
  // Chromium sends `Origin: null` on the form post, which the login CSRF check must then refuse.
  'referrer-policy': 'same-origin'
}

export interface LoginPageOptions {
  /** Already validated with safeRedirect. */
  redirect: string
  /** Prefill after a failed attempt. */
  username?: string
  error?: string
}

export function renderLoginPage ({ redirect, username = '', error }: LoginPageOptions): string {
  const errorBlock = error === undefined
    ? ''
    : `\n    <p class="error" id="login-error" role="alert">${escapeHtml(error)}</p>`
  const describedBy = error === undefined ? '' : ' aria-describedby="login-error"'
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Sign in · Reaktor service</title>
  <style>${STYLE}</style>
</head>
<body>
  <main>
    <h1>Sign in</h1>${errorBlock}
    <form method="post" action="/login"${describedBy}>
      <input type="hidden" name="redirect" value="${escapeHtml(redirect)}">
      <label for="username">Username</label>
      <input type="text" id="username" name="username" value="${escapeHtml(username)}" autocomplete="username" autocapitalize="none" spellcheck="false" required${username === '' ? ' autofocus' : ''}>
      <label for="password">Password</label>
      <input type="password" id="password" name="password" autocomplete="current-password" required${username === '' ? '' : ' autofocus'}>
      <button type="submit">Sign in</button>
    </form>
  </main>
  <script>${KEEP_FRAGMENT}</script>
</body>
</html>
`
}

/** A loaded app: `url` is where its UI is served, absent when it has none. */
export interface HomePageApp { name: string, version: string, url?: string, reaktors: number }

/** The app whose UI is the console: the home page's first entry when it is loaded. */
const CONSOLE_APP = 'reaktor-console'

function reaktorCount (n: number): string {
  return n === 0 ? 'no polling reaktor' : `${n} polling reaktor${n === 1 ? '' : 's'}`
}

/**
 * `GET /`: who is signed in, the console first (when its app is loaded), the other app UIs, the
 * apps without one, and a sign-out button. Same stylesheet and policy as the login page, whose
 * `form-action 'self'` lets the button post to `/logout`.
 */
export function renderHomePage (username: string, apps: HomePageApp[]): string {
  // Of several loaded versions of the console, the newest.
  const consoleApp = apps.filter((a) => a.name === CONSOLE_APP && a.url !== undefined)
    .sort((a, b) => b.version.localeCompare(a.version, 'en', { numeric: true }))[0]
  const consoleLink = consoleApp === undefined
    ? ''
    : `\n    <a class="console" href="${escapeHtml(consoleApp.url ?? '')}">Open the console</a>\n    <p class="hint">Polling reaktors and their runs, users and API tokens.</p>`
  const withUi = apps.filter((a) => a.url !== undefined && a !== consoleApp)
  const withoutUi = apps.filter((a) => a.url === undefined)
  const uiList = withUi.length === 0
    ? `<p>No ${consoleApp === undefined ? '' : 'other '}app has a UI yet. Apps live in <code>REAKTOR_APPS_DIR</code>.</p>`
    : `<ul>${withUi.map((a) => `\n      <li><a href="${escapeHtml(a.url ?? '')}">${escapeHtml(a.name)}</a> ${escapeHtml(a.version)}</li>`).join('')}\n    </ul>`
  const noUiList = withoutUi.length === 0
    ? ''
    : `\n    <h2>Apps without a UI</h2>\n    <ul>${withoutUi.map((a) => `\n      <li>${escapeHtml(a.name)} ${escapeHtml(a.version)} — ${reaktorCount(a.reaktors)}, no UI</li>`).join('')}\n    </ul>`
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Reaktor service</title>
  <style>${STYLE}</style>
</head>
<body>
  <main class="home">
    <h1>Reaktor service</h1>
    <p>Signed in as <strong>${escapeHtml(username)}</strong>.</p>${consoleLink}
    <h2>App UIs</h2>
    ${uiList}${noUiList}
    <p><a href="/docs">API documentation</a>: every operation, and a place to try them with a token.</p>
    <form class="sign-out" method="post" action="/logout"><button type="submit">Sign out</button></form>
  </main>
</body>
</html>
`
}
