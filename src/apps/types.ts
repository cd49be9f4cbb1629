import type { PollingReaktorRegistration, ReaktorRegistration } from '../sdk/types.js'

/**
 * An app as the service holds it after loading: from a folder of REAKTOR_APPS_DIR, or passed in
 * code to buildApp (then `dir`/`publicDir` may be absent).
 */
export interface LoadedApp {
  name: string
  version: string
  /** The app folder; undefined for apps registered in code without a folder. */
  dir: string | undefined
  /** Absolute path of `public/` when the app has a UI. */
  publicDir: string | undefined
  settings: Readonly<Record<string, unknown>>
  pollingReaktors: PollingReaktorRegistration[]
  reaktors: ReaktorRegistration[]
}

/** An app given to buildApp in code. */
export interface AppDefinition {
  name: string
  version: string
  dir?: string
  publicDir?: string
  settings?: Record<string, unknown>
  pollingReaktors?: PollingReaktorRegistration[]
  reaktors?: ReaktorRegistration[]
}

export interface RegisteredPollingReaktor {
  app: LoadedApp
  registration: PollingReaktorRegistration
  /** The parsed `interval`; the scheduler applies its minimum (3 s) on top. */
  intervalMs: number
  timeoutMs: number
}

export interface RegisteredReaktor {
  app: LoadedApp
  registration: ReaktorRegistration
  timeoutMs: number
}

/** Everything loaded, indexed for the routes and the scheduler. */
export interface AppRegistry {
  apps: LoadedApp[]
  /** Exact `<name>@<version>` lookup (scoped names included). */
  findApp: (name: string, version: string) => LoadedApp | undefined
  pollingReaktors: Map<string, RegisteredPollingReaktor>
  reaktors: Map<string, RegisteredReaktor>
}
