// @ts-check
// The public REST API with the signed-in user's session token. A 401 (signed out, session ended,
// user disabled) goes to the login page, which brings the user back to this very view.

/**
 * An answer of the API, parsed from its JSON. Its shape is the API's schema (the service's /docs),
 * which the browser tests hold the views to; it is not written out a second time here.
 * @typedef {any} Answer
 */

export class LoginRequired extends Error {}

/** An API error: `status` and the service's `{statusCode, error, message}`. */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} message
   */
  constructor (status, message) {
    super(message)
    this.status = status
  }
}

export function goToLogin () {
  const here = window.location.pathname + window.location.search + window.location.hash
  window.location.assign('/login?redirect=' + encodeURIComponent(here))
}

/**
 * `api('GET', '/polling', undefined, {limit: 50})` → the parsed JSON answer, or throws ApiError.
 * @param {string} method
 * @param {string} path below /api/v1
 * @param {unknown} [body] sent as JSON; a Blob (a file to upload) as it is, typed by its `type`
 * @param {Record<string, string | number | null | undefined>} [query] empty values left out
 * @returns {Promise<Answer>}
 */
export async function api (method, path, body, query) {
  const token = typeof window.getServiceAuthToken === 'function' ? window.getServiceAuthToken() : null
  if (!token) {
    goToLogin()
    throw new LoginRequired('not signed in')
  }
  const url = new URL('/api/v1' + path, window.location.origin)
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(key, String(value))
  }
  /** @type {Record<string, string>} */
  const headers = { 'X-Service-Token': token, Accept: 'application/json' }
  const raw = body instanceof Blob
  if (body !== undefined) headers['Content-Type'] = raw ? body.type || 'application/octet-stream' : 'application/json'
  const res = await fetch(url, { method, headers, body: body === undefined ? undefined : raw ? body : JSON.stringify(body) })
  if (res.status === 401) {
    goToLogin()
    throw new LoginRequired('session ended')
  }
  const data = res.status === 204 ? null : await res.json().catch(() => null)
  if (!res.ok) throw new ApiError(res.status, (data && data.message) || `${method} ${path} answered ${res.status}`)
  return data
}

/**
 * An id or name as one path segment.
 * @param {string} value
 */
export const seg = (value) => encodeURIComponent(value)
