import fs from 'node:fs/promises'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import type { PollingReaktorRegistration, ReaktorAppModule, ReaktorRegistration } from '../sdk/types.js'
import { RegistrationError } from './registry.js'
import { ensureSdkResolution } from './sdk-resolution.js'
import { resolveSettings } from './settings.js'
import type { LoadedApp } from './types.js'

type Env = Record<string, string | undefined>

export interface LoaderLog {
  info: (obj: object, msg: string) => void
  warn: (obj: object, msg: string) => void
}

// npm's rule for package names (lower case, URL-safe), scoped names included: the name becomes
// the `<name>@<version>` segment of the app's UI URL.
const PACKAGE_NAME = /^(?:@[a-z0-9-~][a-z0-9-._~]*\/)?[a-z0-9-~][a-z0-9-._~]*$/

/** Whether `name` is a name the loader accepts for an app (npm's rule; `reaktor new-app` checks with it too). */
export function isPackageName (name: string): boolean {
  return PACKAGE_NAME.test(name)
}
// A version must be a single URL path segment: semver and its relatives pass.
const PACKAGE_VERSION = /^[0-9A-Za-z][0-9A-Za-z.+_-]*$/

function isObject (value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

async function isDirectory (p: string): Promise<boolean> {
  try {
    return (await fs.stat(p)).isDirectory()
  } catch {
    return false
  }
}

/**
 * The folders under `dir` that hold apps: not dot-folders, not node_modules; symlinks to folders
 * count. A folder without a package.json is no app (an editor's or a tool's leftover): it is passed
 * over with one warning, so that it cannot stop every real app from loading.
 */
async function appFolders (dir: string, log: LoaderLog): Promise<string[]> {
  let entries
  try {
    entries = await fs.readdir(dir, { withFileTypes: true })
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT') {
      log.info({ dir }, 'REAKTOR_APPS_DIR does not exist; no reaktor apps loaded from it')
      return []
    }
    if (code === 'ENOTDIR') throw new RegistrationError(`REAKTOR_APPS_DIR ${dir} is not a folder`)
    throw new RegistrationError(`REAKTOR_APPS_DIR ${dir} cannot be read: ${(err as Error).message}`)
  }
  const folders: string[] = []
  const notApps: string[] = []
  for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    if (entry.name.startsWith('.') || entry.name === 'node_modules') continue
    const full = path.join(dir, entry.name)
    if (!entry.isDirectory() && !(entry.isSymbolicLink() && await isDirectory(full))) continue
    // Only a package.json that is surely absent makes a folder no app: one that is there but
    // unreadable (a dangling link, a folder we may not enter) is a broken app, and loadApp stops
    // the start naming it.
    const absent = await fs.lstat(path.join(full, 'package.json')).then(() => false, (err: NodeJS.ErrnoException) => err.code === 'ENOENT')
    if (absent) notApps.push(full)
    else folders.push(full)
  }
  if (notApps.length > 0) log.warn({ folders: notApps }, `skipped ${notApps.length === 1 ? 'a folder' : 'folders'} of REAKTOR_APPS_DIR without a package.json (not reaktor apps): ${notApps.join(', ')}`)
  return folders
}

function registrations<T> (label: string, exports: Record<string, unknown>, field: string): T[] {
  const value = exports[field]
  if (value === undefined || value === null) return []
  if (!Array.isArray(value)) throw new RegistrationError(`${label}: the export "${field}" must be an array of registrations, got ${typeof value}`)
  return value as T[]
}

/**
 * Picks the app's exports: a default export object holding `pollingReaktors` or `reaktors`, else
 * the module's named exports.
 */
function appExports (mod: Record<string, unknown>): Record<string, unknown> {
  const fallback = mod.default
  if (isObject(fallback) && ('pollingReaktors' in fallback || 'reaktors' in fallback)) return fallback
  return mod
}

/** Loads one app folder. Every problem is a RegistrationError naming the app and the problem. */
async function loadApp (dir: string, env: Env): Promise<LoadedApp> {
  const folder = `app folder ${dir}`
  let pkg: unknown
  try {
    pkg = JSON.parse(await fs.readFile(path.join(dir, 'package.json'), 'utf8'))
  } catch (err) {
    const problem = err instanceof SyntaxError ? 'is not valid JSON' : 'cannot be read'
    throw new RegistrationError(`${folder}: package.json ${problem}: ${(err as Error).message}`)
  }
  if (!isObject(pkg)) throw new RegistrationError(`${folder}: package.json must hold a JSON object`)

  const { name, version } = pkg
  if (typeof name !== 'string' || name === '') {
    throw new RegistrationError(`${folder}: package.json needs a "name" (for example "my-app" or "@acme/widgets")`)
  }
  if (!isPackageName(name)) {
    throw new RegistrationError(`${folder}: package.json name ${JSON.stringify(name)} is not a valid package name (lower case letters, digits, - . _ ~, optionally @scope/)`)
  }
  if (typeof version !== 'string' || version === '') {
    throw new RegistrationError(`app ${name} (${folder}): package.json needs a "version" (for example "1.0.0")`)
  }
  if (!PACKAGE_VERSION.test(version)) {
    throw new RegistrationError(`app ${name} (${folder}): package.json version ${JSON.stringify(version)} is not valid (letters, digits, . + _ -)`)
  }
  const label = `app ${name}@${version}`

  const reaktorField = pkg.reaktor
  if (reaktorField !== undefined && !isObject(reaktorField)) throw new RegistrationError(`${label}: package.json "reaktor" must be an object`)
  const defaults = reaktorField?.settings ?? {}
  if (!isObject(defaults)) throw new RegistrationError(`${label}: package.json "reaktor.settings" must be an object of setting defaults`)
  const settings = resolveSettings(label, name, defaults, env)

  const main = pkg.main ?? 'index.js'
  if (typeof main !== 'string' || main === '') throw new RegistrationError(`${label}: package.json "main" must be a file name`)
  const entry = path.resolve(dir, main)
  if (path.relative(dir, entry).startsWith('..')) throw new RegistrationError(`${label}: entry module "${main}" is outside the app folder`)
  if (!(await fs.stat(entry).then((s) => s.isFile(), () => false))) {
    throw new RegistrationError(`${label}: entry module "${main}" not found in ${dir}${pkg.main === undefined ? ' (set "main" in package.json when it is not index.js)' : ''}`)
  }

  ensureSdkResolution()
  let mod: Record<string, unknown>
  try {
    mod = await import(pathToFileURL(entry).href)
  } catch (err) {
    throw new RegistrationError(`${label}: entry module "${main}" failed to import: ${err instanceof Error ? err.message : String(err)}`)
  }
  const exports = appExports(mod)

  const publicDir = path.join(dir, 'public')
  return {
    name,
    version,
    dir,
    publicDir: await isDirectory(publicDir) ? publicDir : undefined,
    settings,
    pollingReaktors: registrations<PollingReaktorRegistration>(label, exports, 'pollingReaktors' satisfies keyof ReaktorAppModule),
    reaktors: registrations<ReaktorRegistration>(label, exports, 'reaktors' satisfies keyof ReaktorAppModule)
  }
}

/**
 * Loads every app folder of REAKTOR_APPS_DIR (README "Writing a reaktor app"), in name order. A missing
 * folder means no apps; any problem with an app stops the start with one message naming it.
 * The registrations themselves are checked by `buildRegistry`.
 */
export async function loadAppsFromDir (dir: string, env: Env, log: LoaderLog): Promise<LoadedApp[]> {
  const apps: LoadedApp[] = []
  for (const folder of await appFolders(dir, log)) {
    const app = await loadApp(folder, env)
    log.info({ app: `${app.name}@${app.version}`, dir: folder, pollingReaktors: app.pollingReaktors.length, reaktors: app.reaktors.length, ui: app.publicDir !== undefined },
      'reaktor app loaded')
    apps.push(app)
  }
  return apps
}
