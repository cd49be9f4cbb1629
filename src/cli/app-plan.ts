import { MAX_REAKTOR_ID_LENGTH } from '../apps/registry.js'

/** What `reaktor new-app` writes, and the names it derives from the package name. */
export interface AppPlan {
  /** The package name (`my-app`, `@acme/widgets`). */
  name: string
  /** The app's folder name: the name without `@` and with `/` as `-`. */
  base: string
  version: string
  pollingId: string
  aktorId: string
  /** The UI's path on the service (served only when the app has `public/`). */
  uiPath: string
}

const NEW_APP_VERSION = '0.1.0'

const ID_SUFFIXES = { polling: '-poll', aktor: '-hello' }
// A name may be 214 characters long, an id only 200: the ids' prefix is cut to fit the longer suffix.
const MAX_ID_BASE = MAX_REAKTOR_ID_LENGTH - Math.max(...Object.values(ID_SUFFIXES).map((s) => s.length))

/** The names of a new app called `name` (a valid package name). */
export function planApp (name: string): AppPlan {
  // A scoped name cannot be one folder name as it is; `@acme/widgets` → `acme-widgets`, which also
  // keeps its reaktor ids apart from those of an unscoped `widgets`.
  const base = name.replace(/^@/, '').replace('/', '-')
  const idBase = base.slice(0, MAX_ID_BASE).replace(/[-._~]+$/, '')
  return {
    name,
    base,
    version: NEW_APP_VERSION,
    pollingId: idBase + ID_SUFFIXES.polling,
    aktorId: idBase + ID_SUFFIXES.aktor,
    uiPath: `/app-ui/${name}@${NEW_APP_VERSION}/`
  }
}
