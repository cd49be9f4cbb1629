import fs from 'node:fs/promises'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import type { PollingReaktorRegistration, ReaktorAppModule, ReaktorRegistration } from '../sdk/types.js'
import { closest, editDistance } from './closest.js'
import { describeImportError } from './import-errors.js'
import { RegistrationError } from './registry.js'
import { importAppModule } from './sdk-resolution.js'
import { resolveSettings, warnUnknownSettingVariables } from './settings.js'
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

const EXPORTS = ['pollingReaktors', 'reaktors'] satisfies Array<keyof ReaktorAppModule>
/** The keys package.json "reaktor" may hold. */
const REAKTOR_KEYS = ['settings']

/**
 * The export a name was probably meant to be, when it is a near miss of one the service reads:
 * another case, a letter or two off (`pollingReaktor`, `reactors`), or a part of one (`aktors`).
 */
function misspeltExport (name: string): string | undefined {
  if ((EXPORTS as string[]).includes(name)) return undefined
  const lower = name.toLowerCase()
  const meant = closest(name, EXPORTS)
  if (meant === undefined) return undefined
  const part = lower.includes('aktor') && meant.toLowerCase().includes(lower)
  return editDistance(name, meant) <= 2 || part ? meant : undefined
}

/**
 * An export the service would pass over in silence, leaving the app without its reaktors, stops
 * the start instead: a named export, or a key of a default export object, that looks like a
 * misspelt `pollingReaktors` or `reaktors`.
 */
function checkExportNames (label: string, main: string, mod: Record<string, unknown>): void {
  const fallback = mod.default
  const named = Object.keys(mod).filter((name) => name !== 'default').map((name) => [name, `exports "${name}"`])
  const keys = isObject(fallback) ? Object.keys(fallback).map((key) => [key, `exports a default object with "${key}"`]) : []
  for (const [name, what] of [...named, ...keys]) {
    const meant = misspeltExport(name)
    if (meant !== undefined) throw new RegistrationError(`${label}: entry module "${main}" ${what}, which is not read; did you mean "${meant}"?`)
  }
}

/** Places an entry module often is: suggested when `main` names no file. */
const COMMON_ENTRIES = ['index.js', 'index.mjs', 'dist/index.js', 'dist/index.mjs', 'lib/index.js', 'build/index.js', 'src/index.js', 'src/index.ts', 'index.ts']

/** The existing file nearest to `main`: among the folder's own scripts, those beside `main`, and the common places. */
async function entryCandidate (dir: string, main: string): Promise<string | undefined> {
  const candidates = new Set(COMMON_ENTRIES)
  for (const folder of new Set(['.', path.dirname(main)])) {
    const names = await fs.readdir(path.join(dir, folder)).catch(() => [])
    for (const name of names) if (/\.([cm]?js|ts)$/.test(name)) candidates.add(path.posix.join(folder, name))
  }
  const existing: string[] = []
  for (const candidate of candidates) {
    if (await fs.stat(path.join(dir, candidate)).then((s) => s.isFile(), () => false)) existing.push(candidate)
  }
  return closest(main, existing)
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
async function loadApp (dir: string, env: Env, log: LoaderLog): Promise<LoadedApp> {
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
  for (const key of Object.keys(reaktorField ?? {})) {
    if (!REAKTOR_KEYS.includes(key)) {
      throw new RegistrationError(`${label}: package.json "reaktor" has the unknown key "${key}"; did you mean "${closest(key, REAKTOR_KEYS)}"? (known keys: ${REAKTOR_KEYS.join(', ')})`)
    }
  }
  const defaults = reaktorField?.settings ?? {}
  if (!isObject(defaults)) throw new RegistrationError(`${label}: package.json "reaktor.settings" must be an object of setting defaults`)
  const settings = resolveSettings(label, name, defaults, env)

  const main = pkg.main ?? 'index.js'
  if (typeof main !== 'string' || main === '') throw new RegistrationError(`${label}: package.json "main" must be a file name`)
  const entry = path.resolve(dir, main)
  if (path.relative(dir, entry).startsWith('..')) throw new RegistrationError(`${label}: entry module "${main}" is outside the app folder`)
  if (!(await fs.stat(entry).then((s) => s.isFile(), () => false))) {
    const read = pkg.main === undefined ? 'package.json has no "main", so the default index.js was assumed' : `read from package.json "main"`
    const candidate = await entryCandidate(dir, main)
    const fix = candidate === undefined ? 'create it or set "main" to the entry module' : `did you mean "${candidate}"? Set "main" in package.json to the entry module`
    throw new RegistrationError(`${label}: entry module "${main}" not found in ${dir} (${read}); ${fix}`)
  }

  const dirs = [dir, await fs.realpath(dir).catch(() => dir)]
  let imported: Awaited<ReturnType<typeof importAppModule>>
  try {
    imported = await importAppModule(pathToFileURL(entry).href, dirs)
  } catch (err) {
    throw new RegistrationError(`${label}: entry module "${main}" failed to import: ${await describeImportError(err, dirs, entry)}`)
  }
  const { mod, typeless } = imported
  if (typeless.length > 0) {
    const files = typeless.map((file) => path.relative(dirs.find((d) => !path.relative(d, file).startsWith('..')) ?? dir, file))
    log.warn({ app: `${name}@${version}`, files, packageJson: path.join(dir, 'package.json') },
      `${label}: package.json has no "type": "module", so Node reparses ${files.join(', ')} as ES module${files.length === 1 ? '' : 's'} on every start; add "type": "module" to package.json`)
  }
  checkExportNames(label, main, mod)
  const exports = appExports(mod)

  const publicDir = path.join(dir, 'public')
  return {
    name,
    version,
    dir,
    publicDir: await isDirectory(publicDir) ? publicDir : undefined,
    settings,
    pollingReaktors: registrations<PollingReaktorRegistration>(label, exports, 'pollingReaktors'),
    reaktors: registrations<ReaktorRegistration>(label, exports, 'reaktors')
  }
}

/**
 * Loads every app folder of REAKTOR_APPS_DIR (README "Writing a reaktor app"), in name order. A missing
 * folder means no apps; any problem with an app stops the start with one message naming it.
 * The registrations themselves are checked by `buildRegistry`. Once all are loaded, every
 * settings variable that overrides nothing is warned about; `otherApps` (given in code) count as
 * loaded for that.
 */
export async function loadAppsFromDir (dir: string, env: Env, log: LoaderLog, otherApps: readonly LoadedApp[] = []): Promise<LoadedApp[]> {
  const apps: LoadedApp[] = []
  for (const folder of await appFolders(dir, log)) {
    const app = await loadApp(folder, env, log)
    log.info({ app: `${app.name}@${app.version}`, dir: folder, pollingReaktors: app.pollingReaktors.length, reaktors: app.reaktors.length, ui: app.publicDir !== undefined },
      'reaktor app loaded')
    apps.push(app)
  }
  warnUnknownSettingVariables([...apps, ...otherApps], env, log)
  return apps
}
