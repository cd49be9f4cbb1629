/**
 * Where to send the browser after a login: a same-origin path, or `/`.
 *
 * The input is resolved with the WHATWG URL parser (the one browsers use) against a fixed
 * placeholder origin, and the *result* is checked: it must still be on that origin, and the path
 * we hand back must start with exactly one `/`. Checking the result, not the string, covers what
 * the parser normalises away (tabs and newlines dropped, `\` read as `/`, `..` segments resolved):
 * `/..//evil` resolves to the path `//evil`, which a browser would read as another host.
 */
const PLACEHOLDER_ORIGIN = 'http://login-redirect.invalid'
const FALLBACK = '/'
const MAX_LENGTH = 2048

export function safeRedirect (input: unknown): string {
  if (typeof input !== 'string' || input.length === 0 || input.length > MAX_LENGTH) return FALLBACK
  // Only absolute paths are meant here; refusing control characters and backslashes before parsing
  // is belt and braces, the checks on the resolved URL below are what make it safe.
  // eslint-disable-next-line no-control-regex
  if (!input.startsWith('/') || /[\u0000-\u001f\u007f\\]/.test(input)) return FALLBACK
  let url: URL
  try {
    url = new URL(input, PLACEHOLDER_ORIGIN)
  } catch {
    return FALLBACK
  }
  if (url.origin !== PLACEHOLDER_ORIGIN || url.username !== '' || url.password !== '') return FALLBACK
  const target = url.pathname + url.search + url.hash
  if (!target.startsWith('/') || target.startsWith('//') || target.includes('\\')) return FALLBACK
  return target
}
