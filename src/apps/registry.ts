import { parseDuration } from '../duration.js'
import type { AppRegistry, LoadedApp, RegisteredPollingReaktor, RegisteredReaktor } from './types.js'

/** Shortest interval the distributed timer runs a polling reaktor at (spec section 8). */
export const MIN_POLLING_INTERVAL_MS = 3000
export const DEFAULT_POLLING_TIMEOUT = '5m'
export const DEFAULT_AKTOR_TIMEOUT = '30s'

export class RegistrationError extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'RegistrationError'
  }
}

interface Log { warn: (obj: object, msg: string) => void }

function appLabel (app: LoadedApp): string {
  return `app ${app.name}@${app.version}`
}

function duration (app: LoadedApp, id: string, field: string, value: string): number {
  try {
    return parseDuration(value)
  } catch {
    throw new RegistrationError(`${appLabel(app)}: reaktor "${id}": ${field} ${JSON.stringify(value)} is malformed; expected an integer followed by ms, s, m, h or d (for example 30s)`)
  }
}

/**
 * Indexes every app's registrations by reaktorDefinitionId and checks them: each problem stops the
 * start with one message naming the app, the reaktor and the problem.
 */
export function buildRegistry (apps: LoadedApp[], log: Log): AppRegistry {
  const pollingReaktors = new Map<string, RegisteredPollingReaktor>()
  const reaktors = new Map<string, RegisteredReaktor>()
  const owners = new Map<string, LoadedApp>()
  const byKey = new Map<string, LoadedApp>()

  const claim = (app: LoadedApp, id: unknown): string => {
    if (typeof id !== 'string' || id === '') {
      throw new RegistrationError(`${appLabel(app)}: a registration has no reaktorDefinitionId`)
    }
    const other = owners.get(id)
    if (other !== undefined) {
      throw new RegistrationError(`reaktorDefinitionId "${id}" is registered twice: by ${appLabel(other)} and by ${appLabel(app)}`)
    }
    owners.set(id, app)
    return id
  }

  for (const app of apps) {
    if (typeof app.name !== 'string' || app.name === '' || typeof app.version !== 'string' || app.version === '') {
      throw new RegistrationError(`app ${app.dir ?? JSON.stringify(app.name)}: package.json needs a name and a version`)
    }
    const key = `${app.name}@${app.version}`
    if (byKey.has(key)) throw new RegistrationError(`${appLabel(app)} is loaded twice`)
    byKey.set(key, app)

    for (const registration of app.pollingReaktors) {
      const id = claim(app, registration?.reaktorDefinitionId)
      if (typeof registration.createReaktor !== 'function') {
        throw new RegistrationError(`${appLabel(app)}: polling reaktor "${id}" has no createReaktor function`)
      }
      if (typeof registration.interval !== 'string') {
        throw new RegistrationError(`${appLabel(app)}: polling reaktor "${id}" has no interval; expected a string such as "30s"`)
      }
      const intervalMs = duration(app, id, 'interval', registration.interval)
      if (intervalMs < MIN_POLLING_INTERVAL_MS) {
        log.warn({ reaktorId: id, app: key, interval: registration.interval },
          `polling reaktor "${id}": interval ${registration.interval} is below the 3s minimum; it runs every 3s`)
      }
      const timeoutMs = duration(app, id, 'timeout', registration.timeout ?? DEFAULT_POLLING_TIMEOUT)
      pollingReaktors.set(id, { app, registration, intervalMs, timeoutMs })
    }

    for (const registration of app.reaktors) {
      const id = claim(app, registration?.reaktorDefinitionId)
      if (typeof registration.createReaktor !== 'function') {
        throw new RegistrationError(`${appLabel(app)}: reaktor "${id}" has no createReaktor function`)
      }
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
