import fs from 'node:fs/promises'
import { createRequire } from 'node:module'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import type { PollingReaktorRegistration, ReaktorAppModule, ReaktorRegistration } from '../sdk/types.js'
import { closest, nearEnough } from '../lib/closest-match.js'
import { atOrBelow } from '../lib/path-below.js'
import { describeImportError, display, plainMessage } from './import-errors.js'
import { RegistrationError } from './registry.js'
import { importAppModule, ImportTooLong, RELOAD_PARAM, type ImportTrace } from './sdk-resolution.js'
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

/** The longest app name (npm's limit) and version the service takes. */
export const PACKAGE_NAME_MAX = 214
export const PACKAGE_VERSION_MAX = 256

/** Whether `name` is a name the loader accepts for an app (npm's rule; `reaktor new-app` checks with it too). */
export function isPackageName (name: string): boolean {
  return PACKAGE_NAME.test(name)
}
// A version must be a single URL path segment: semver and its relatives pass.
const PACKAGE_VERSION = /^[0-9A-Za-z][0-9A-Za-z.+_-]*$/

/** Whether `version` is a version the loader accepts for an app (one URL path segment: letters, digits, . + _ -). */
export function isPackageVersion (version: string): boolean {
  return PACKAGE_VERSION.test(version)
}

function isObject (value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Whether `p` is a folder (a link to one counts); false when it cannot be read. */
export async function isDirectory (p: string): Promise<boolean> {
  try {
    return (await fs.stat(p)).isDirectory()
  } catch {
    return false
  }
}

/**
 * The folders under `dir` that hold apps, in name order: not dot-folders, not node_modules;
 * symlinks to folders count. A folder without a package.json is no app (an editor's or a tool's
 * leftover): it is passed over with one warning, so that it cannot stop every real app from loading.
 */
export async function appFolders (dir: string, log: LoaderLog): Promise<string[]> {
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
const READ = `the service reads only ${EXPORTS.map((name) => `"${name}"`).join(' and ')}`
/** The keys package.json "reaktor" may hold. */
const REAKTOR_KEYS = ['settings']

function isRegistration (value: unknown): boolean {
  return typeof value === 'object' && value !== null && typeof (value as { reaktorDefinitionId?: unknown }).reaktorDefinitionId === 'string'
}

/**
 * What is wrong with an export the service passes over, when it surely held registrations: an
 * array under a near miss of a name the service reads (another case, a letter or two off:
 * `pollingReaktor`, `reactors`), empty or holding a registration; or an array holding a
 * registration under any other name (`pollReaktors`). A value of another kind under a like name
 * (a `Reaktor` class, an `aktors` object) is the app's own business.
 */
function unreadExport (name: string, value: unknown): string | undefined {
  if ((EXPORTS as string[]).includes(name) || !Array.isArray(value)) return undefined
  const holdsRegistration = value.some(isRegistration)
  const nearMiss = closest(name, EXPORTS, 2)
  if (nearMiss !== undefined && (value.length === 0 || holdsRegistration)) return `did you mean "${nearMiss}"?`
  if (!holdsRegistration) return undefined
  const meant = closest(name, EXPORTS, nearEnough(name))
  return `it holds registrations, but ${READ}${meant === undefined ? '' : `; did you mean "${meant}"?`}`
}

/**
 * An export the service would pass over in silence, leaving the app without its reaktors, stops
 * the start instead: a named export, or a key of a default export object, that holds
 * registrations under a name the service does not read. A module whose exports cannot be listed
 * or read (a Proxy, a throwing getter) is not checked: the check is a help, not a gate.
 */
function checkExportNames (label: string, main: string, mod: Record<string, unknown>): void {
  let problems: Array<[string, string]>
  try {
    const fallback = mod.default
    const named = Object.keys(mod).filter((name) => name !== 'default').map((name) => [`exports "${name}"`, unreadExport(name, mod[name])])
    const keys = isObject(fallback) ? Object.keys(fallback).map((key) => [`exports a default object with "${key}"`, unreadExport(key, fallback[key])]) : []
    problems = [...named, ...keys].filter((pair): pair is [string, string] => pair[1] !== undefined)
  } catch {
    return
  }
  if (problems.length === 0) return
  const [what, problem] = problems[0]
  throw new RegistrationError(`${label}: entry module "${main}" ${what}, which is not read; ${problem}`)
}

/** Places an entry module often is: suggested when `main` names no file. */
const COMMON_ENTRIES = ['index.js', 'index.mjs', 'dist/index.js', 'dist/index.mjs', 'lib/index.js', 'build/index.js', 'src/index.js', 'src/index.ts', 'index.ts']

async function isFile (p: string): Promise<boolean> {
  return await fs.stat(p).then((s) => s.isFile(), () => false)
}

/** Scripts in a folder of the app that could be an entry module: no tool's configuration (`eslint.config.js`). */
async function scriptsIn (dir: string, folder: string): Promise<string[]> {
  const names = await fs.readdir(path.join(dir, folder)).catch(() => [])
  return names.filter((name) => /\.([cm]?js|ts)$/.test(name) && !/\.config\.[cm]?[jt]s$/.test(name) && !name.startsWith('.')).map((name) => path.posix.join(folder, name))
}

/**
 * The existing file `main` was probably meant to be: a common place or a script beside `main`,
 * the nearest first; any other script of the app folder only when it is a near miss. When `main`
 * is a folder, its index module (Node does not look for one when importing an ES module).
 */
async function entryCandidate (dir: string, main: string, mainIsFolder: boolean): Promise<string | undefined> {
  if (mainIsFolder) {
    const folder = path.posix.normalize(main).replace(/\/$/, '')
    for (const name of ['index.js', 'index.mjs', 'index.cjs']) if (await isFile(path.join(dir, folder, name))) return path.posix.join(folder, name)
    return undefined
  }
  const likely = new Set([...COMMON_ENTRIES, ...await scriptsIn(dir, path.posix.dirname(main))])
  const existing: string[] = []
  for (const candidate of likely) if (await isFile(path.join(dir, candidate))) existing.push(candidate)
  return closest(main, existing) ?? closest(main, await scriptsIn(dir, '.'), nearEnough(main))
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

/**
 * Keys under package.json "reaktor" other than the known ones: a near miss of a known key (a
 * letter or two off, another case) stops the start, since the setting it was meant for would be
 * passed over; any other key gets a warning (a newer service's key, a tool's). Keys starting with
 * `//` are comments, as npm has them.
 */
function checkReaktorKeys (label: string, name: string, version: string, keys: string[], log: LoaderLog): void {
  const unknown = keys.filter((key) => !REAKTOR_KEYS.includes(key) && !key.startsWith('//'))
  const known = `known keys: ${REAKTOR_KEYS.join(', ')}`
  for (const key of unknown) {
    const meant = closest(key, REAKTOR_KEYS, 2)
    if (meant !== undefined) throw new RegistrationError(`${label}: package.json "reaktor" has the unknown key "${key}"; did you mean "${meant}"? (${known})`)
  }
  if (unknown.length > 0) {
    log.warn({ app: `${name}@${version}`, keys: unknown },
      `${label}: package.json "reaktor" has the unknown key${unknown.length === 1 ? '' : 's'} ${unknown.map((key) => `"${key}"`).join(', ')}, which ${unknown.length === 1 ? 'is' : 'are'} ignored (${known})`)
  }
}

/**
 * One warning per package.json that lacks "type": "module" for files Node reparsed as ES modules:
 * the one Node named, the nearest to the files (the app's own or a nested one). Node says nothing
 * for files under node_modules, whose authors alone could fix them.
 */
function warnTypeless (label: string, app: string, dir: string, dirs: readonly string[], typeless: ImportTrace['typeless'], log: LoaderLog): void {
  const shown = (file: string): string => display(file, dirs)
  const byPackage = new Map<string, string[]>()
  for (const { file, packageJson } of typeless) {
    const key = packageJson ?? path.join(dir, 'package.json')
    byPackage.set(key, [...byPackage.get(key) ?? [], file])
  }
  for (const [packageJson, reparsed] of byPackage) {
    const files = reparsed.map(shown)
    const what = `${files.join(', ')} as ES module${files.length === 1 ? '' : 's'} on every start`
    const pkg = shown(packageJson)
    log.warn({ app, files, packageJson },
      `${label}: ${pkg} has no "type": "module", so Node reparses ${what}; add "type": "module" to ${pkg}`)
  }
}

/**
 * How long an entry module may take to import. One that never finishes (a top-level await that
 * never settles) would otherwise stop the start with Fastify's "Plugin did not start in time:
 * 'apps'" after 10 s, for every app together and naming none.
 */
export const IMPORT_LIMIT_MS = 5000

/**
 * Drops the app's own CommonJS files from require's cache, so that a reload runs them afresh: the
 * import hooks do not see `require`, which would return the modules of the first load.
 */
function forgetCommonJs (realDir: string): void {
  const cache = createRequire(import.meta.url).cache
  for (const file of Object.keys(cache)) {
    if (atOrBelow(file, realDir) && !path.relative(realDir, file).split(path.sep).includes('node_modules')) delete cache[file]
  }
}

export interface LoadOptions {
  /**
   * Imports the app's own modules afresh, whether or not this process imported them before: Node
   * imports a module URL once, so each load gets a number, which every file of the app carries
   * in its URL (src/apps/sdk-resolution.ts). The dev loop reloads an app in place with it.
   */
  fresh?: boolean
}

/** The loads with `fresh` in this process so far: each one's number is new. */
let freshLoads = 0

/** Loads one app folder (of REAKTOR_APPS_DIR, or a published package unpacked). Every problem is a RegistrationError naming the app and the problem. */
export async function loadApp (dir: string, env: Env, log: LoaderLog, { fresh = false }: LoadOptions = {}): Promise<LoadedApp> {
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
  if (!isPackageVersion(version)) {
    throw new RegistrationError(`app ${name} (${folder}): package.json version ${JSON.stringify(version)} is not valid (letters, digits, . + _ -)`)
  }
  const label = `app ${name}@${version}`

  const reaktorField = pkg.reaktor
  if (reaktorField !== undefined && !isObject(reaktorField)) throw new RegistrationError(`${label}: package.json "reaktor" must be an object`)
  checkReaktorKeys(label, name, version, Object.keys(reaktorField ?? {}), log)
  const defaults = reaktorField?.settings ?? {}
  if (!isObject(defaults)) throw new RegistrationError(`${label}: package.json "reaktor.settings" must be an object of setting defaults`)
  const settings = resolveSettings(label, name, defaults, env)

  const main = pkg.main ?? 'index.js'
  if (typeof main !== 'string' || main === '') throw new RegistrationError(`${label}: package.json "main" must be a file name`)
  const entry = path.resolve(dir, main)
  if (path.relative(dir, entry).startsWith('..')) throw new RegistrationError(`${label}: entry module "${main}" is outside the app folder`)
  const entryStat = await fs.stat(entry).catch(() => undefined)
  if (entryStat?.isFile() !== true) {
    const read = pkg.main === undefined ? 'package.json has no "main", so the default index.js was assumed' : 'read from package.json "main"'
    const isFolder = entryStat?.isDirectory() === true
    const candidate = await entryCandidate(dir, main, isFolder)
    const fix = candidate === undefined ? 'create it or set "main" to the entry module' : `did you mean "${candidate}"? Set "main" in package.json to the entry module`
    const problem = isFolder ? 'is a folder, not a module' : `not found in ${dir}`
    throw new RegistrationError(`${label}: entry module "${main}" ${problem} (${read}); ${fix}`)
  }

  const dirs = [dir, await fs.realpath(dir).catch(() => dir)]
  if (fresh) forgetCommonJs(dirs[1])
  const trace: ImportTrace = { typeless: [], loaded: [] }
  let mod: Record<string, unknown>
  try {
    const url = pathToFileURL(entry)
    if (fresh) url.searchParams.set(RELOAD_PARAM, String(++freshLoads))
    mod = await importAppModule(url.href, dirs, trace, IMPORT_LIMIT_MS)
  } catch (err) {
    if (err instanceof ImportTooLong) {
      throw new RegistrationError(`${label}: entry module "${main}" did not finish importing within ${IMPORT_LIMIT_MS / 1000} s ` +
        '(a top-level await that never settles? Slow work, such as connecting somewhere, belongs in the aktor, on its first run)')
    }
    throw new RegistrationError(`${label}: entry module "${main}" failed to import: ${await describeImportError(err, dirs, entry, trace.loaded)}`)
  }
  warnTypeless(label, `${name}@${version}`, dir, dirs, trace.typeless, log)
  checkExportNames(label, main, mod)
  let pollingReaktors: PollingReaktorRegistration[]
  let reaktors: ReaktorRegistration[]
  try {
    const exports = appExports(mod)
    pollingReaktors = registrations<PollingReaktorRegistration>(label, exports, 'pollingReaktors')
    reaktors = registrations<ReaktorRegistration>(label, exports, 'reaktors')
  } catch (err) {
    if (err instanceof RegistrationError) throw err
    throw new RegistrationError(`${label}: the exports of entry module "${main}" cannot be read: ${plainMessage(err)}`)
  }

  const publicDir = path.join(dir, 'public')
  return {
    name,
    version,
    dir,
    publicDir: await isDirectory(publicDir) ? publicDir : undefined,
    settings,
    pollingReaktors,
    reaktors
  }
}

/**
 * Loads every app folder of REAKTOR_APPS_DIR (docs/apps.md), in name order. A missing
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
