import { RegistrationError } from './registry.js'
import { closest, nearEnough } from '../lib/closest-match.js'

type Env = Record<string, string | undefined>

/** Upper-cases and turns every run of non-alphanumerics into one `_`, trimmed at both ends. */
function envSegment (value: string): string {
  return value.toUpperCase().replace(/[^A-Z0-9]+/g, '_').replace(/^_+|_+$/g, '')
}

/**
 * The environment variable that overrides setting `setting` of app `appName`:
 * `REAKTOR_SETTING_<APP>_<SETTING>`, each part upper-cased with every run of non-alphanumerics
 * turned into one `_` (trimmed). `@acme/widgets` + `apiUrl` → `REAKTOR_SETTING_ACME_WIDGETS_APIURL`;
 * `drain-demo` + `batch-size` → `REAKTOR_SETTING_DRAIN_DEMO_BATCH_SIZE`.
 */
export function settingEnvName (appName: string, setting: string): string {
  return `REAKTOR_SETTING_${envSegment(appName)}_${envSegment(setting)}`
}

function kindOf (value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'array'
  return typeof value
}

/**
 * An app's settings: its defaults, each overridden by its environment variable when that is set
 * and not empty. A string default takes the value as it is; any other default takes it as JSON of
 * the same kind (number, boolean, array, object); a `null` default takes JSON when it parses and
 * the raw string otherwise.
 */
export function resolveSettings (appLabel: string, appName: string, defaults: Record<string, unknown>, env: Env): Readonly<Record<string, unknown>> {
  const settings: Record<string, unknown> = {}
  const seen = new Map<string, string>()
  for (const [name, fallback] of Object.entries(defaults)) {
    const variable = settingEnvName(appName, name)
    const other = seen.get(variable)
    if (other !== undefined) {
      throw new RegistrationError(`${appLabel}: settings "${other}" and "${name}" both map to the environment variable ${variable}; rename one`)
    }
    seen.set(variable, name)
    const raw = env[variable]
    if (raw === undefined || raw === '') {
      define(settings, name, fallback)
      continue
    }
    if (typeof fallback === 'string') {
      define(settings, name, raw)
      continue
    }
    let parsed: unknown
    try {
      parsed = JSON.parse(raw)
    } catch (err) {
      if (fallback === null) {
        define(settings, name, raw)
        continue
      }
      throw new RegistrationError(`${appLabel}: setting "${name}": ${variable} is not valid JSON (${(err as Error).message}); the default is a ${kindOf(fallback)}, so the value must be JSON, for example ${JSON.stringify(fallback)}`)
    }
    if (fallback !== null && kindOf(parsed) !== kindOf(fallback)) {
      throw new RegistrationError(`${appLabel}: setting "${name}": ${variable} is a ${kindOf(parsed)}; expected a ${kindOf(fallback)} like the default ${JSON.stringify(fallback)}`)
    }
    define(settings, name, parsed)
  }
  return frozenCopy(settings)
}

/**
 * Sets an own data property. Plain assignment of a key named `__proto__` (an ordinary key in JSON)
 * would set the object's prototype instead: the setting would vanish, and settings whose prototype
 * is not Object.prototype would be passed over by the freeze.
 */
function define (target: object, key: string | symbol, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
}

/**
 * A copy of plain data frozen at every depth: one settings object is shared by every run and call
 * of an app, so a change made by one aktor (`settings.nested.a = …`, `settings.tags.push(…)`) would
 * leak into all later ones. Copied first so that objects an app passed in code stay its own; other
 * values (class instances, functions) are kept as they are, since freezing them would break them.
 */
function frozenCopy<T> (value: T, copies = new Map<object, unknown>()): T {
  if (typeof value !== 'object' || value === null) return value
  const done = copies.get(value)
  if (done !== undefined) return done as T
  const proto = Object.getPrototypeOf(value) as object | null
  if (!Array.isArray(value) && proto !== Object.prototype && proto !== null) return value
  const copy = (Array.isArray(value) ? [] : Object.create(proto)) as Record<string | symbol, unknown>
  copies.set(value, copy)
  for (const key of Reflect.ownKeys(value)) {
    const descriptor = Object.getOwnPropertyDescriptor(value, key)
    if (descriptor === undefined || !descriptor.enumerable) continue
    define(copy, key, frozenCopy((value as Record<string | symbol, unknown>)[key], copies))
  }
  return Object.freeze(copy) as T
}

const SETTING_PREFIX = 'REAKTOR_SETTING_'

interface SettingsOwner { name: string, version: string, dir?: string | undefined, settings: Readonly<Record<string, unknown>> }

/**
 * Warns once per `REAKTOR_SETTING_*` variable that overrides no setting of any loaded app: a typo
 * there would otherwise leave the default in place without a word. Every (app, setting) pair is
 * matched, since one app's name can prefix another's (`foo` + `bar-x` and `foo-bar` + `x` both
 * give `REAKTOR_SETTING_FOO_BAR_X`) and two versions of an app share their variables. An empty
 * variable counts as unset, so it is passed over. A variable is suggested only when it is a near
 * miss; a far one would send the reader the wrong way.
 */
export function warnUnknownSettingVariables (apps: readonly SettingsOwner[], env: Env, log: { warn: (obj: object, msg: string) => void }): void {
  const known = new Map<string, SettingsOwner[]>()
  for (const app of apps) {
    for (const setting of Object.keys(app.settings)) {
      const variable = settingEnvName(app.name, setting)
      known.set(variable, [...known.get(variable) ?? [], app])
    }
  }
  for (const [variable, value] of Object.entries(env)) {
    if (!variable.startsWith(SETTING_PREFIX) || value === undefined || value === '' || known.has(variable)) continue
    // The longest app name that prefixes it: for REAKTOR_SETTING_FOO_BAR_X the app foo-bar, not
    // foo; every version of that name.
    const segment = apps.map((app) => envSegment(app.name)).filter((name) => variable.startsWith(`${SETTING_PREFIX}${name}_`))
      .sort((a, b) => b.length - a.length)[0]
    const owners = apps.filter((app) => envSegment(app.name) === segment)
    const ownVariables = [...known].filter(([, holders]) => holders.some((app) => owners.includes(app))).map(([name]) => name)
    const limit = nearEnough(variable.slice(SETTING_PREFIX.length))
    const closestVariable = closest(variable, owners.length > 0 && ownVariables.length > 0 ? ownVariables : known.keys(), limit)
    const app = owners.length === 0 ? undefined : owners.map(labelOf).join(', ')
    const others = closestVariable === undefined ? [] : (known.get(closestVariable) ?? []).filter((holder) => !owners.includes(holder))
    const suggestion = closestVariable === undefined ? '' : `; did you mean ${closestVariable}${others.length > 0 ? ` (app ${others.map(labelOf).join(', ')})` : ''}?`
    const problem = owners.length === 0
      ? `names no loaded app${closestVariable === undefined ? ` (loaded: ${apps.map(labelOf).join(', ') || 'none'})` : ''}`
      : `matches no setting of app ${owners.map(labelOf).join(' or ')}${ownVariables.length === 0 ? ` (${declaresNone(owners)})` : ''}`
    log.warn({ variable, app, closest: closestVariable }, `${variable} ${problem}, so it is ignored${suggestion}`)
  }
}

/** Why an app has no variables, for folder apps with where settings are declared. */
function declaresNone (owners: readonly SettingsOwner[]): string {
  const one = owners.length === 1
  if (owners.every((app) => app.dir === undefined)) return `${one ? 'it was' : 'they were'} given in code without settings`
  return `${one ? 'it declares' : 'they declare'} no settings${owners.every((app) => app.dir !== undefined) ? ' in package.json "reaktor.settings"' : ''}`
}

function labelOf (app: SettingsOwner): string {
  return `${app.name}@${app.version}`
}
