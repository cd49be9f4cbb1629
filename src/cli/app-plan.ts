/** What `reaktor new-app` writes, and the names it derives from the package name. */
export interface AppPlan {
  /** The package name (`my-app`, `@acme/widgets`). */
  name: string
  /** The app's folder name, and the prefix of its reaktor ids: the name without `@` and with `/` as `-`. */
  base: string
  version: string
  pollingId: string
  aktorId: string
  /** The UI's path on the service (served only when the app has `public/`). */
  uiPath: string
}

export const NEW_APP_VERSION = '0.1.0'

/** The names of a new app called `name` (a valid package name). */
export function planApp (name: string): AppPlan {
  // A scoped name cannot be one folder name as it is; `@acme/widgets` → `acme-widgets`, which also
  // keeps its reaktor ids apart from those of an unscoped `widgets`.
  const base = name.replace(/^@/, '').replace('/', '-')
  return { name, base, version: NEW_APP_VERSION, pollingId: `${base}-poll`, aktorId: `${base}-hello`, uiPath: `/app-ui/${name}@${NEW_APP_VERSION}/` }
}
