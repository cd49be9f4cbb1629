import { isDuration, MAX_TIMER_MS, parseDuration } from '../lib/duration.js'
import { CliError, EXIT, type ExitCode } from './errors.js'

/** The default service address: `npm start` on this machine. */
export const DEFAULT_URL = 'http://127.0.0.1:3000'

/** How long one request may take unless REAKTOR_TIMEOUT says otherwise. */
const DEFAULT_TIMEOUT = '30s'

/**
 * REAKTOR_TIMEOUT in milliseconds. Without a bound, a service that accepts the connection but never
 * answers (a stalled node, a hung proxy) would hold a script for the HTTP client's own five minutes.
 */
export function requestTimeoutMs (env: Record<string, string | undefined>): number {
  const value = env.REAKTOR_TIMEOUT === undefined || env.REAKTOR_TIMEOUT.trim() === '' ? DEFAULT_TIMEOUT : env.REAKTOR_TIMEOUT.trim()
  const ms = isDuration(value) ? parseDuration(value) : 0
  if (ms === 0 || ms > MAX_TIMER_MS) {
    throw new CliError(EXIT.usage, `REAKTOR_TIMEOUT must be a duration such as 30s or 2m (1ms to 24d), not ${JSON.stringify(value)}`)
  }
  return ms
}

export interface RequestOptions {
  /** Sent as JSON. */
  body?: unknown
  /** Sent as it is, with its own Content-Type, instead of `body` (an app package for `POST /apps`). */
  raw?: { bytes: Uint8Array<ArrayBuffer>, contentType: string }
  query?: Record<string, string | number | boolean | undefined>
  /** Send the token (default); login is the one call without. */
  auth?: boolean
  /** Answer null on this status instead of failing (e.g. 404 when asking whether something exists). */
  allow?: number[]
}

/** The exit code of an API error status: scripts tell "not found" and "not allowed" from other failures. */
function exitCodeOf (status: number): ExitCode {
  // The service refused the input as invalid: a bad argument, as commander's own usage errors;
  // 414 is an argument too long for a path (an id past the router's limit).
  if (status === 400 || status === 414) return EXIT.usage
  if (status === 401 || status === 403) return EXIT.auth
  if (status === 404) return EXIT.notFound
  return EXIT.error
}

/**
 * The most of one answer the CLI reads: far above any list the service sends (a status is under
 * 1 KiB), far below what would exhaust the process's memory when something else answers, endlessly.
 */
const MAX_ANSWER_BYTES = 256 * 1024 * 1024

/** The service's REST API, `/api/v1`, with the token in `X-Service-Token`. */
export class ApiClient {
  constructor (readonly url: string, private readonly token: string | undefined, readonly timeoutMs: number = parseDuration(DEFAULT_TIMEOUT), private readonly maxAnswerBytes = MAX_ANSWER_BYTES) {}

  /** The same service, the same timeout, another token. */
  withToken (token: string | undefined): ApiClient {
    return new ApiClient(this.url, token, this.timeoutMs, this.maxAnswerBytes)
  }

  async request<T = any>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const target = new URL(`/api/v1${path}`, this.url)
    // An argument of "." or ".." (encoding keeps it: "%2E" is a dot to a URL too) would be resolved
    // away, and the request would reach another route: `polling start .` the bulk start.
    if (target.pathname !== `/api/v1${path}`) {
      throw new CliError(EXIT.usage, `"." and ".." cannot be sent as an id or a name: they are not one part of a URL path (${method} /api/v1${path})`)
    }
    for (const [key, value] of Object.entries(options.query ?? {})) {
      if (value !== undefined) target.searchParams.set(key, String(value))
    }
    const headers: Record<string, string> = { accept: 'application/json' }
    if (options.auth !== false) {
      if (this.token === undefined) throw new CliError(EXIT.auth, `not logged in to ${this.url}: run "reaktor login", or set REAKTOR_TOKEN`)
      // fetch refuses such a header value with an error that quotes it: the token would be printed.
      if (!/^[\x21-\x7e]+$/.test(this.token)) throw new CliError(EXIT.auth, 'the token (REAKTOR_TOKEN, else the stored login) holds a space, a line break or a character no token has: not sent')
      headers['x-service-token'] = this.token
    }
    if (options.raw !== undefined) headers['content-type'] = options.raw.contentType
    else if (options.body !== undefined) headers['content-type'] = 'application/json'
    const payload = options.raw !== undefined ? options.raw.bytes : options.body === undefined ? undefined : JSON.stringify(options.body)
    const signal = AbortSignal.timeout(this.timeoutMs)
    let response: Response
    let text: string
    try {
      response = await fetch(target, { method, headers, body: payload, redirect: 'manual', signal })
      text = await this.answerText(response, `${method} ${target.pathname}`)
    } catch (err) {
      if (err instanceof CliError) throw err
      if (signal.aborted) throw new CliError(EXIT.error, `no answer from ${this.url} within ${this.timeoutMs}ms (REAKTOR_TIMEOUT): ${method} ${target.pathname}`)
      const cause = (err as { cause?: { code?: string, message?: string } }).cause
      throw new CliError(EXIT.error, `cannot reach ${this.url}: ${cause?.code ?? cause?.message ?? (err as Error).message}`)
    }
    let body: any = null
    try {
      body = text === '' ? null : JSON.parse(text)
    } catch {
      // Not JSON (a proxy's error page): the status tells what happened.
    }
    if (response.ok) {
      // Every answer of the API is an object: anything else (a web page, a bare value) means that
      // something other than the service answered, which commands must not read fields of.
      if (text !== '' && (body === null || typeof body !== 'object' || Array.isArray(body))) {
        throw new CliError(EXIT.error, `${method} ${target.pathname} answered ${response.status} with no JSON object: is ${this.url} a reaktor service?`)
      }
      return body as T
    }
    if (options.allow?.includes(response.status) === true) return null as T
    const message = typeof body?.message === 'string' ? body.message : `${method} ${target.pathname} answered ${response.status}`
    // The hint is for a refused token: a refused password (login itself) is no reason to log in again.
    const hint = response.status === 401 && options.auth !== false ? ' (run "reaktor login", or set REAKTOR_TOKEN)' : ''
    throw new CliError(exitCodeOf(response.status), `${message}${hint}`)
  }

  private async answerText (response: Response, what: string): Promise<string> {
    const tooLarge = (): CliError => new CliError(EXIT.error, `${what}: the answer is larger than ${this.maxAnswerBytes} bytes, not read (is ${this.url} a reaktor service?)`)
    if (Number(response.headers.get('content-length')) > this.maxAnswerBytes) {
      await response.body?.cancel()
      throw tooLarge()
    }
    if (response.body === null) return ''
    const reader = response.body.getReader()
    const chunks: Uint8Array[] = []
    let size = 0
    for (let read = await reader.read(); read.done !== true; read = await reader.read()) {
      size += read.value.byteLength
      if (size > this.maxAnswerBytes) {
        await reader.cancel()
        throw tooLarge()
      }
      chunks.push(read.value)
    }
    return Buffer.concat(chunks).toString('utf8')
  }
}
