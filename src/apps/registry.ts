import { MAX_TIMER_MS, parseDuration } from '../lib/duration.js'
import type { AppRegistry, LoadedApp, RegisteredPollingReaktor, RegisteredReaktor } from './types.js'

/** Shortest interval the distributed timer runs a polling reaktor at: 3 s. */
export const MIN_POLLING_INTERVAL_MS = 3000
export const DEFAULT_POLLING_TIMEOUT = '5m'
export const DEFAULT_AKTOR_TIMEOUT = '30s'
export const MAX_REAKTOR_ID_LENGTH = 200
export class RegistrationError extends Error {
  readonly code = 'REAKTOR_REGISTRATION'
  constructor (message: string) {
    super(message)
    this.name = 'RegistrationError'
  }
}

interface Log { warn: (obj: object, msg: string) => void }

function appLabel (app: LoadedApp): string {
  return `app ${app.name}@${app.version}`
}

/** How a value of the wrong type reads in a message: `the number 5000`, `an object`, `null`. */
function given (value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  if (typeof value === 'object') return 'an object'
  if (typeof value === 'function') return 'a function'
  return `the ${typeof value} ${String(value)}`
}

/**
 * A duration given as something other than a string: a number is the likely slip (milliseconds,
 * as setTimeout takes them), so it gets the string that means the same.
 */
function durationTypeError (app: LoadedApp, what: string, field: string, value: unknown): RegistrationError {
  let hint = ''
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) {
    hint = ` (for ${value} ms write "${value}ms"${value > 0 && value % 1000 === 0 ? ` or "${value / 1000}s"` : ''})`
  }
  return new RegistrationError(`${appLabel(app)}: ${what}: ${field} must be a duration string such as "30s"; got ${given(value)}${hint}`)
}

function duration (app: LoadedApp, id: string, field: string, value: string): number {
  let ms: number
  try {
    ms = parseDuration(value)
  } catch {
    throw new RegistrationError(`${appLabel(app)}: reaktor "${id}": ${field} ${JSON.stringify(value)} is malformed; expected an integer followed by ms, s, m, h or d (for example 30s)`)
  }
  // A zero interval is legal (it runs at the 3 s minimum); a zero timeout would fail every run.
  if (field === 'timeout' && ms === 0) {
    throw new RegistrationError(`${appLabel(app)}: reaktor "${id}": timeout ${JSON.stringify(value)} must be greater than zero`)
  }
  if (field === 'timeout' && ms > MAX_TIMER_MS) {
    throw new RegistrationError(`${appLabel(app)}: reaktor "${id}": timeout ${JSON.stringify(value)} is too long; at most ${MAX_TIMER_MS} ms (about 24 days, e.g. 24d)`)
  }
  return ms
}

/** A timeout is optional; when given it is a duration string like an interval. */
function checkTimeoutType (app: LoadedApp, what: string, timeout: unknown): void {
  if (timeout !== undefined && timeout !== null && typeof timeout !== 'string') throw durationTypeError(app, what, 'timeout', timeout)
}

/**
 * Where an app came from, for messages about two apps: its folder, or its place among the apps
 * given in code without one (two of those are otherwise told apart by nothing).
 */
function origin (app: LoadedApp, apps: readonly LoadedApp[]): string {
  if (app.dir !== undefined) return `folder ${app.dir}`
  return `app no. ${apps.filter((other) => other.dir === undefined).indexOf(app) + 1} given in code without a folder`
}

/**
 * Indexes every app's registrations by reaktorDefinitionId and checks them: each problem stops the
 * start with one message naming the app, the reaktor and the problem.
 */
export function buildRegistry (apps: LoadedApp[], log: Log): AppRegistry {
  const pollingReaktors = new Map<string, RegisteredPollingReaktor>()
  const reaktors = new Map<string, RegisteredReaktor>()
  const owners = new Map<string, { app: LoadedApp, where: string }>()
  const byKey = new Map<string, LoadedApp>()

  const claim = (app: LoadedApp, registration: unknown, where: string): string => {
    if (typeof registration !== 'object' || registration === null) {
      throw new RegistrationError(`${appLabel(app)}: ${where} is not a registration object`)
    }
    const id = (registration as { reaktorDefinitionId?: unknown }).reaktorDefinitionId
    if (typeof id !== 'string' || id.trim() === '') {
      throw new RegistrationError(`${appLabel(app)}: ${where} has no reaktorDefinitionId`)
    }
    // The id travels in URL paths, log lines, lock keys and PostgreSQL text: printable, of sane
    // length, and no lone surrogate (which PostgreSQL would store as U+FFFD, another id).
    if (id.length > MAX_REAKTOR_ID_LENGTH || /[\p{Cc}\p{Cs}]/u.test(id)) {
      throw new RegistrationError(`${appLabel(app)}: ${where}: reaktorDefinitionId ${JSON.stringify(id)} is not allowed; expected at most ${MAX_REAKTOR_ID_LENGTH} printable characters`)
    }
    // A URL resolves "." and ".." away (encoded too): no request could name the reaktor in a path.
    if (id === '.' || id === '..') {
      throw new RegistrationError(`${appLabel(app)}: ${where}: reaktorDefinitionId ${JSON.stringify(id)} is not allowed: a URL path cannot carry it`)
    }
    const other = owners.get(id)
    if (other?.app === app) {
      throw new RegistrationError(`reaktorDefinitionId "${id}" is registered twice in ${appLabel(app)} (${other.where} and ${where}); give each registration its own id`)
    }
    if (other !== undefined) {
      throw new RegistrationError(`reaktorDefinitionId "${id}" is registered twice: by ${appLabel(other.app)} (${other.where}) and by ${appLabel(app)} (${where}); ids are unique across all apps`)
    }
    owners.set(id, { app, where })
    return id
  }

  for (const app of apps) {
    if (typeof app.name !== 'string' || app.name === '' || typeof app.version !== 'string' || app.version === '') {
      throw new RegistrationError(`app ${app.dir ?? JSON.stringify(app.name)}: package.json needs a name and a version`)
    }
    const key = `${app.name}@${app.version}`
    const twin = byKey.get(key)
    if (twin !== undefined) {
      throw new RegistrationError(`${appLabel(app)} is loaded twice: from ${origin(twin, apps)} and from ${origin(app, apps)}; remove one or give it another version`)
    }
    byKey.set(key, app)

    for (const field of ['pollingReaktors', 'reaktors'] as const) {
      if (!Array.isArray(app[field])) throw new RegistrationError(`${appLabel(app)}: ${field} must be an array of registrations`)
    }

    for (const [index, registration] of app.pollingReaktors.entries()) {
      const id = claim(app, registration, `pollingReaktors[${index}]`)
      if (typeof registration.createReaktor !== 'function') {
        throw new RegistrationError(`${appLabel(app)}: polling reaktor "${id}" has no createReaktor function`)
      }
      if (registration.interval === undefined) {
        throw new RegistrationError(`${appLabel(app)}: polling reaktor "${id}" has no interval; expected a duration string such as "30s"`)
      }
      if (typeof registration.interval !== 'string') throw durationTypeError(app, `polling reaktor "${id}"`, 'interval', registration.interval)
      checkTimeoutType(app, `polling reaktor "${id}"`, registration.timeout)
      if (registration.autoStart !== undefined && typeof registration.autoStart !== 'boolean') {
        throw new RegistrationError(`${appLabel(app)}: polling reaktor "${id}": autoStart must be true or false, got ${JSON.stringify(registration.autoStart)}`)
      }
      const intervalMs = duration(app, id, 'interval', registration.interval)
      if (intervalMs < MIN_POLLING_INTERVAL_MS) {
        log.warn({ reaktorId: id, app: key, interval: registration.interval },
          `${appLabel(app)}: polling reaktor "${id}": interval ${registration.interval} is below the 3s minimum; it runs every 3s`)
      }
      const timeoutMs = duration(app, id, 'timeout', registration.timeout ?? DEFAULT_POLLING_TIMEOUT)
      pollingReaktors.set(id, { app, registration, intervalMs, timeoutMs })
    }

    for (const [index, registration] of app.reaktors.entries()) {
      const id = claim(app, registration, `reaktors[${index}]`)
      if (typeof registration.createReaktor !== 'function') {
        throw new RegistrationError(`${appLabel(app)}: reaktor "${id}" has no createReaktor function`)
      }
      checkTimeoutType(app, `reaktor "${id}"`, registration.timeout)
      const timeoutMs = duration(app, id, 'timeout', registration.timeout ?? DEFAULT_AKTOR_TIMEOUT)
      reaktors.set(id, { app, registration, timeoutMs })
    }
  }

  return {
    apps,
    findApp: (name, version) => byKey.get(`${name}@${version}`),
    pollingReaktors,
    reaktors
  }
}
