import t from 'tap'
import fs from 'node:fs/promises'
import path from 'node:path'
import { loadConfig as serviceLoadConfig } from '../../src/app.js'
import { loadAppsFromDir } from '../../src/apps/loader.js'
import { buildRegistry } from '../../src/apps/registry.js'
import { settingEnvName } from '../../src/apps/settings.js'
import { MissingSettingError, type AktorContext, type AktorLogger } from '../../src/sdk/index.js'
import { build } from '../helpers/app.js'
import { ESM, loadError, POLLING, writeApp } from '../helpers/app-folder.js'
import { tempDir } from '../helpers/temp-dir.js'
import { memoryLogger, silentLogger } from '../helpers/log.js'
import { EXAMPLE_APPS_DIR } from '../helpers/paths.js'

function contextFor (settings: Readonly<Record<string, unknown>>, log?: Partial<AktorLogger>): AktorContext {
  return { signal: new AbortController().signal, log: { ...silentLogger, ...log }, settings, reaktorId: 'test', runId: 'run' }
}

t.test('a missing REAKTOR_APPS_DIR means no apps, with an info line', async (t) => {
  const root = await tempDir(t)
  const log = memoryLogger()
  t.same(await loadAppsFromDir(path.join(root, 'nope'), {}, log), [])
  t.match(log.lines, [{ level: 'info', msg: /does not exist/ }])
})

t.test('REAKTOR_APPS_DIR that is a file stops the start', async (t) => {
  const root = await tempDir(t)
  await fs.writeFile(path.join(root, 'file'), '')
  t.match(await loadError(t, path.join(root, 'file')), /REAKTOR_APPS_DIR .*file is not a folder/)
})

t.test('every folder is an app; files, dot-folders, node_modules and dangling links are skipped', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'b-app', { name: 'b-app', version: '1.0.0', ...ESM }, { 'index.js': POLLING.replace("'poll'", "'poll-b'") })
  await writeApp(root, 'a-app', { name: 'a-app', version: '2.0.0', ...ESM }, { 'index.js': POLLING.replace("'poll'", "'poll-a'") })
  await writeApp(root, '.hidden', undefined, { 'index.js': 'throw new Error("never imported")' })
  await writeApp(root, 'node_modules', undefined, { 'x.js': '' })
  await fs.writeFile(path.join(root, 'README.md'), '# not an app')
  await fs.symlink(path.join(root, 'gone'), path.join(root, 'z-dangling-link'))
  const apps = await loadAppsFromDir(root, {}, memoryLogger())
  t.same(apps.map((a) => `${a.name}@${a.version}`), ['a-app@2.0.0', 'b-app@1.0.0'], 'in folder name order')
  t.equal(apps[0].dir, path.join(root, 'a-app'))
  t.equal(apps[0].pollingReaktors[0].reaktorDefinitionId, 'poll-a')
})

t.test('an app folder reached through a symlink is loaded', async (t) => {
  const root = await tempDir(t)
  const elsewhere = await tempDir(t)
  await writeApp(elsewhere, 'linked', { name: 'linked', version: '1.0.0', ...ESM }, { 'index.js': POLLING })
  await fs.symlink(path.join(elsewhere, 'linked'), path.join(root, 'linked'))
  const apps = await loadAppsFromDir(root, {}, memoryLogger())
  t.same(apps.map((a) => a.name), ['linked'])
})

t.test('named exports, a default export, and neither', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'named', { name: 'named', version: '1.0.0', ...ESM }, {
    'index.js': `${POLLING}\nexport const reaktors = [{ reaktorDefinitionId: 'named-aktor', createReaktor: () => (input) => input }]`
  })
  await writeApp(root, 'default', { name: 'default', version: '1.0.0', ...ESM }, {
    'index.js': `export default { reaktors: [{ reaktorDefinitionId: 'default-aktor', createReaktor: () => () => 'hi' }] }`
  })
  await writeApp(root, 'ui-only', { name: 'ui-only', version: '1.0.0', ...ESM }, { 'index.js': 'export const unrelated = 1', 'public/index.html': '<p>hi</p>' })
  const apps = await loadAppsFromDir(root, {}, memoryLogger())
  const byName = Object.fromEntries(apps.map((a) => [a.name, a]))
  t.same(byName.named.pollingReaktors.map((r) => r.reaktorDefinitionId), ['poll'])
  t.same(byName.named.reaktors.map((r) => r.reaktorDefinitionId), ['named-aktor'])
  t.same(byName.default.pollingReaktors, [], 'pollingReaktors may be absent')
  t.same(byName.default.reaktors.map((r) => r.reaktorDefinitionId), ['default-aktor'])
  t.same(byName['ui-only'].pollingReaktors, [])
  t.same(byName['ui-only'].reaktors, [])
  t.equal(byName['ui-only'].publicDir, path.join(root, 'ui-only', 'public'), 'publicDir when public/ exists')
  t.equal(byName.named.publicDir, undefined, 'no publicDir without public/')
})

t.test('main names the entry module; index.js is the default', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'custom-main', { name: 'custom-main', version: '1.0.0', main: 'lib/entry.mjs' }, { 'lib/entry.mjs': POLLING })
  const [app] = await loadAppsFromDir(root, {}, memoryLogger())
  t.equal(app.pollingReaktors[0].reaktorDefinitionId, 'poll')
})

t.test('scoped package names are loaded and keep their scope', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'widgets', { name: '@acme/widgets', version: '0.1.0', ...ESM, reaktor: { settings: { color: 'blue' } } }, { 'index.js': POLLING })
  const env = { [settingEnvName('@acme/widgets', 'color')]: 'green' }
  t.equal(settingEnvName('@acme/widgets', 'color'), 'REAKTOR_SETTING_ACME_WIDGETS_COLOR')
  const [app] = await loadAppsFromDir(root, env, memoryLogger())
  t.equal(app.name, '@acme/widgets')
  t.equal(app.version, '0.1.0')
  t.equal(app.settings.color, 'green')
  const registry = buildRegistry([app], memoryLogger())
  t.equal(registry.findApp('@acme/widgets', '0.1.0'), app)
})

t.test('the settings environment variable name rule', async (t) => {
  t.equal(settingEnvName('drain-demo', 'workMs'), 'REAKTOR_SETTING_DRAIN_DEMO_WORKMS')
  t.equal(settingEnvName('heartbeat', 'message'), 'REAKTOR_SETTING_HEARTBEAT_MESSAGE')
  t.equal(settingEnvName('@acme/widgets', 'api-url'), 'REAKTOR_SETTING_ACME_WIDGETS_API_URL')
  t.equal(settingEnvName('my.app', 'a__b'), 'REAKTOR_SETTING_MY_APP_A_B', 'runs of non-alphanumerics become one _')
})

t.test('settings: package.json defaults, overridden by environment variables', async (t) => {
  const root = await tempDir(t)
  const defaults = { message: 'hello', limit: 10, enabled: false, tags: ['a'], nested: { x: 1 }, anything: null, untouched: 'same' }
  await writeApp(root, 'settings-app', { name: 'settings-app', version: '1.0.0', ...ESM, reaktor: { settings: defaults } }, { 'index.js': POLLING })

  const [plain] = await loadAppsFromDir(root, {}, memoryLogger())
  t.same(plain.settings, defaults, 'defaults without environment')
  t.ok(Object.isFrozen(plain.settings))
  t.ok(Object.isFrozen(plain.settings.nested) && Object.isFrozen(plain.settings.tags), 'frozen at every depth, arrays too')
  t.throws(() => { (plain.settings.nested as { x: number }).x = 2 }, TypeError, 'a nested setting cannot be changed')
  t.throws(() => (plain.settings.tags as string[]).push('b'), TypeError, 'nor an array setting')

  const env = {
    REAKTOR_SETTING_SETTINGS_APP_MESSAGE: '{"not": "parsed"}',
    REAKTOR_SETTING_SETTINGS_APP_LIMIT: '25',
    REAKTOR_SETTING_SETTINGS_APP_ENABLED: 'true',
    REAKTOR_SETTING_SETTINGS_APP_TAGS: '["x","y"]',
    REAKTOR_SETTING_SETTINGS_APP_NESTED: '{"x":2,"y":3}',
    REAKTOR_SETTING_SETTINGS_APP_ANYTHING: 'plain text',
    REAKTOR_SETTING_SETTINGS_APP_UNTOUCHED: '',
    REAKTOR_SETTING_SETTINGS_APP_UNDECLARED: 'ignored'
  }
  const [app] = await loadAppsFromDir(root, env, memoryLogger())
  t.same(app.settings, {
    message: '{"not": "parsed"}', // a string default takes the value as it is
    limit: 25,
    enabled: true,
    tags: ['x', 'y'],
    nested: { x: 2, y: 3 },
    anything: 'plain text', // a null default: JSON when it parses, else the string
    untouched: 'same' // empty means unset
  })
  t.notOk('undeclared' in app.settings, 'only declared settings can be set')

  const [json] = await loadAppsFromDir(root, { REAKTOR_SETTING_SETTINGS_APP_ANYTHING: '{"a":1}' }, memoryLogger())
  t.same(json.settings.anything, { a: 1 })
  t.ok(Object.isFrozen(json.settings.anything), 'an override parsed from JSON is frozen too')
})

t.test('settings: a setting named __proto__ (at any depth) is a setting like any other, and the settings stay frozen', async (t) => {
  const root = await tempDir(t)
  // Written as JSON text: in package.json "__proto__" is an ordinary key.
  const pkg = '{"name": "proto-app", "version": "1.0.0", "type": "module", "reaktor": {"settings": ' +
    '{"__proto__": {"a": 1}, "nested": {"__proto__": {"b": 2}, "c": 3}}}}'
  await writeApp(root, 'proto-app', pkg, { 'index.js': POLLING })
  const [app] = await loadAppsFromDir(root, { REAKTOR_SETTING_PROTO_APP_PROTO: '{"a": 5}' }, memoryLogger())
  const settings = app.settings as Record<string, Record<string, unknown>>
  t.ok(Object.isFrozen(settings) && Object.isFrozen(settings.nested), 'frozen at every depth')
  t.throws(() => { settings.nested.c = 4 }, TypeError, 'a nested setting cannot be changed')
  t.equal(Object.getPrototypeOf(settings), Object.prototype, 'the settings object keeps its prototype')
  t.same(Object.keys(settings), ['__proto__', 'nested'], 'both settings are there, as own keys')
  t.same(Object.getOwnPropertyDescriptor(settings, '__proto__')?.value, { a: 5 }, 'the override replaced the setting')
  t.same(Object.getOwnPropertyDescriptor(settings.nested, '__proto__')?.value, { b: 2 }, 'a nested __proto__ key is kept as data')
  t.equal(Object.getPrototypeOf(settings.nested), Object.prototype, 'and does not become the prototype of its object')
})

t.test('settings: a value that does not parse, or parses to the wrong kind, stops the start', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'typed', { name: 'typed', version: '1.0.0', ...ESM, reaktor: { settings: { limit: 10, enabled: true } } }, { 'index.js': POLLING })
  t.match(await loadError(t, root, { REAKTOR_SETTING_TYPED_LIMIT: 'ten' }),
    /^app typed@1\.0\.0: setting "limit": REAKTOR_SETTING_TYPED_LIMIT is not valid JSON .*the default is a number/)
  t.match(await loadError(t, root, { REAKTOR_SETTING_TYPED_LIMIT: '"10"' }),
    /^app typed@1\.0\.0: setting "limit": REAKTOR_SETTING_TYPED_LIMIT is a string; expected a number/)
  t.match(await loadError(t, root, { REAKTOR_SETTING_TYPED_ENABLED: 'yes' }), /setting "enabled": REAKTOR_SETTING_TYPED_ENABLED is not valid JSON/)
})

t.test('settings: two settings mapping to one variable, or a malformed reaktor field, stop the start', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'clash', { name: 'clash', version: '1.0.0', ...ESM, reaktor: { settings: { 'api-url': 'a', api_url: 'b' } } }, { 'index.js': POLLING })
  t.match(await loadError(t, root), /^app clash@1\.0\.0: settings "api-url" and "api_url" both map to the environment variable REAKTOR_SETTING_CLASH_API_URL/)

  const other = await tempDir(t)
  await writeApp(other, 'bad-settings', { name: 'bad-settings', version: '1.0.0', ...ESM, reaktor: { settings: ['x'] } }, { 'index.js': POLLING })
  t.match(await loadError(t, other), /^app bad-settings@1\.0\.0: package.json "reaktor.settings" must be an object/)
})

t.test('package.json problems name the app folder', async (t) => {
  const cases: Array<[string, object | string | undefined, RegExp]> = [
    ['dangling-package', undefined, /^app folder .*dangling-package: package.json cannot be read: ENOENT/],
    ['bad-json', '{ "name": ', /^app folder .*bad-json: package.json is not valid JSON/],
    ['array-json', '[]', /^app folder .*array-json: package.json must hold a JSON object/],
    ['no-name', { version: '1.0.0' }, /^app folder .*no-name: package.json needs a "name"/],
    ['bad-name', { name: 'Bad Name', version: '1.0.0' }, /^app folder .*bad-name: package.json name "Bad Name" is not a valid package name/],
    ['no-version', { name: 'no-version' }, /^app no-version \(app folder .*no-version\): package.json needs a "version"/],
    ['bad-version', { name: 'bad-version', version: '1/0' }, /^app bad-version \(app folder .*bad-version\): package.json version "1\/0" is not valid/]
  ]
  for (const [folder, pkg, expected] of cases) {
    const root = await tempDir(t)
    const dir = await writeApp(root, folder, pkg, { 'index.js': POLLING })
    if (pkg === undefined) await fs.symlink(path.join(root, 'gone.json'), path.join(dir, 'package.json'))
    t.match(await loadError(t, root), expected, folder)
  }
})

t.test('folders without a package.json are not apps: skipped with one warning naming them, the apps load', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'real-app', { name: 'real-app', version: '1.0.0', ...ESM }, { 'index.js': POLLING })
  await writeApp(root, 'a-stray', undefined, { 'index.js': 'throw new Error("never imported")' })
  await fs.mkdir(path.join(root, 'z-empty'))
  const log = memoryLogger()
  const apps = await loadAppsFromDir(root, {}, log)
  t.same(apps.map((a) => a.name), ['real-app'])
  const warnings = log.lines.filter((l) => l.level === 'warn')
  t.equal(warnings.length, 1, 'one warning')
  t.match(warnings[0].msg, /without a package\.json.*a-stray, .*z-empty$/)
  t.same(warnings[0].obj, { folders: [path.join(root, 'a-stray'), path.join(root, 'z-empty')] })
})

t.test('a stray folder does not stop the start; a broken app beside it still does', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'real-app', { name: 'real-app', version: '1.0.0', ...ESM }, { 'index.js': POLLING })
  await fs.mkdir(path.join(root, 'stray'))
  const app = await build(t, { env: { REAKTOR_APPS_DIR: root } })
  t.same([...app.apps.pollingReaktors.keys()], ['poll'], 'the real app is registered')

  await writeApp(root, 'broken', '{ "name": ', { 'index.js': POLLING })
  await t.rejects(build(t, { env: { REAKTOR_APPS_DIR: root } }), { message: /^app folder .*broken: package.json is not valid JSON/ })
})

t.test('entry module problems name the app and include the cause', async (t) => {
  const cases: Array<[string, Record<string, unknown>, Record<string, string>, RegExp]> = [
    ['throws', {}, { 'index.js': 'throw new Error("kaput at import")' },
      /^app throws@1\.0\.0: entry module "index\.js" failed to import: kaput at import/],
    ['syntax', {}, { 'index.js': 'export const = 1' }, /^app syntax@1\.0\.0: entry module "index\.js" failed to import: .*(Unexpected|token)/i],
    ['missing-import', {}, { 'index.js': "import './nope.js'" }, /^app missing-import@1\.0\.0: entry module "index\.js" failed to import: Cannot find module/],
    ['no-entry', {}, {}, /^app no-entry@1\.0\.0: entry module "index\.js" not found in .*no-entry \(package\.json has no "main", so the default index\.js was assumed\); create it or set "main"/],
    ['no-main-file', { main: 'dist/main.js' }, {}, /^app no-main-file@1\.0\.0: entry module "dist\/main\.js" not found/],
    ['outside', { main: '../elsewhere.js' }, {}, /^app outside@1\.0\.0: entry module "\.\.\/elsewhere\.js" is outside the app folder/],
    ['not-array', {}, { 'index.js': 'export const pollingReaktors = { id: 1 }' }, /^app not-array@1\.0\.0: the export "pollingReaktors" must be an array/]
  ]
  for (const [name, extra, files, expected] of cases) {
    const root = await tempDir(t)
    await writeApp(root, name, { name, version: '1.0.0', ...ESM, ...extra }, files)
    t.match(await loadError(t, root), expected, name)
  }
})

t.test('registration problems name the app, the reaktor and the problem', async (t) => {
  const app = (name: string, body: string): Promise<string> => writeApp(root, name, { name, version: '1.0.0', ...ESM }, { 'index.js': body })
  const root = await tempDir(t)
  await app('first', POLLING)
  await app('second', POLLING)
  const loaded = await loadAppsFromDir(root, {}, memoryLogger())
  t.throws(() => buildRegistry(loaded, memoryLogger()), { message: 'reaktorDefinitionId "poll" is registered twice: by app first@1.0.0 (pollingReaktors[0]) and by app second@1.0.0 (pollingReaktors[0]); ids are unique across all apps' })

  const cases: Array<[string, RegExp]> = [
    [`export const pollingReaktors = [{ reaktorDefinitionId: 'p', interval: '5 parsecs', createReaktor: () => () => false }]`,
      /^app x@1\.0\.0: reaktor "p": interval "5 parsecs" is malformed/],
    [`export const pollingReaktors = [{ reaktorDefinitionId: 'p', interval: '5s' }]`,
      /^app x@1\.0\.0: polling reaktor "p" has no createReaktor function/],
    [`export const reaktors = [{ reaktorDefinitionId: 'r' }]`, /^app x@1\.0\.0: reaktor "r" has no createReaktor function/],
    [`export const pollingReaktors = [{ reaktorDefinitionId: 'p', createReaktor: () => () => false }]`, /^app x@1\.0\.0: polling reaktor "p" has no interval/],
    [`export const pollingReaktors = [{ reaktorDefinitionId: 'p', interval: '5s', autoStart: 'yes', createReaktor: () => () => false }]`,
      /^app x@1\.0\.0: polling reaktor "p": autoStart must be true or false/],
    [`export const pollingReaktors = [{ reaktorDefinitionId: 'p', interval: '5s', timeout: '0s', createReaktor: () => () => false }]`,
      /^app x@1\.0\.0: reaktor "p": timeout "0s" must be greater than zero/],
    // Above 2^31-1 ms a timer fires after 1 ms: every run would time out (every call 504) at once.
    [`export const pollingReaktors = [{ reaktorDefinitionId: 'p', interval: '5s', timeout: '30d', createReaktor: () => () => false }]`,
      /^app x@1\.0\.0: reaktor "p": timeout "30d" is too long; at most 2147483647 ms/],
    [`export const reaktors = [{ reaktorDefinitionId: 'r', timeout: '25d', createReaktor: () => () => 1 }]`,
      /^app x@1\.0\.0: reaktor "r": timeout "25d" is too long/],
    [`export const reaktors = [{ createReaktor: () => () => 1 }]`, /^app x@1\.0\.0: reaktors\[0\] has no reaktorDefinitionId/],
    [`export const pollingReaktors = [null]`, /^app x@1\.0\.0: pollingReaktors\[0\] is not a registration object/]
  ]
  for (const [body, expected] of cases) {
    const dir = await tempDir(t)
    await writeApp(dir, 'x', { name: 'x', version: '1.0.0', ...ESM }, { 'index.js': body })
    const apps = await loadAppsFromDir(dir, {}, memoryLogger())
    t.throws(() => buildRegistry(apps, memoryLogger()), expected)
  }
})

t.test('an interval below 3s is accepted with a warning naming the app and reaktor', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'fast', { name: 'fast', version: '1.0.0', ...ESM }, {
    'index.js': `export const pollingReaktors = [{ reaktorDefinitionId: 'quick', interval: '500ms', createReaktor: () => () => false }]`
  })
  const log = memoryLogger()
  const registry = buildRegistry(await loadAppsFromDir(root, {}, memoryLogger()), log)
  t.equal(registry.pollingReaktors.get('quick')?.intervalMs, 500, 'the configured interval is kept; the scheduler applies the minimum')
  t.match(log.lines, [{ level: 'warn', obj: { reaktorId: 'quick', app: 'fast@1.0.0' }, msg: /app fast@1\.0\.0: polling reaktor "quick": interval 500ms is below the 3s minimum/ }])
})

t.test('apps import reaktor-service/sdk and get the service\'s own modules', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'uses-sdk', { name: 'uses-sdk', version: '1.0.0', ...ESM, reaktor: { settings: { greeting: 'hi' } } }, {
    'index.js': `
      import { branch, constant, definePollingReaktor, pipe, setting } from 'reaktor-service/sdk'
      import { loadConfig } from 'reaktor-service'
      export const pollingReaktors = [definePollingReaktor({
        reaktorDefinitionId: 'sdk-user', interval: '5s',
        createReaktor: () => branch(constant(true), pipe(setting('greeting'), (g) => g === 'hi'), constant(false))
      })]
      export const reaktors = [
        { reaktorDefinitionId: 'needs-missing', createReaktor: () => setting('missing') },
        { reaktorDefinitionId: 'root-export', createReaktor: () => () => loadConfig }
      ]`
  })
  const [app] = await loadAppsFromDir(root, {}, memoryLogger())
  const ctx = contextFor(app.settings)
  t.equal(await app.pollingReaktors[0].createReaktor()(undefined, ctx), true, 'the combinators work, with the app settings')
  t.throws(() => app.reaktors[0].createReaktor({ settings: app.settings })(undefined, ctx), MissingSettingError,
    'errors are instances of the service\'s own SDK classes: one module, not a copy')
  t.equal(app.reaktors[1].createReaktor({ settings: app.settings })(undefined, ctx), serviceLoadConfig, '`reaktor-service` is the service itself')
})

t.test('registration errors make build() reject with the message', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'one', { name: 'one', version: '1.0.0', ...ESM }, { 'index.js': POLLING })
  await writeApp(root, 'two', { name: 'two', version: '1.0.0', ...ESM }, { 'index.js': POLLING })
  await t.rejects(build(t, { env: { REAKTOR_APPS_DIR: root } }), { message: 'reaktorDefinitionId "poll" is registered twice: by app one@1.0.0 (pollingReaktors[0]) and by app two@1.0.0 (pollingReaktors[0]); ids are unique across all apps' })

  const broken = await tempDir(t)
  await writeApp(broken, 'broken', { name: 'broken', version: '1.0.0', ...ESM }, { 'index.js': 'throw new Error("no luck")' })
  await t.rejects(build(t, { env: { REAKTOR_APPS_DIR: broken } }), { message: /^app broken@1\.0\.0: entry module "index\.js" failed to import: no luck/ })

  // A folder app and an app given in code clash too.
  const single = await tempDir(t)
  await writeApp(single, 'one', { name: 'one', version: '1.0.0', ...ESM }, { 'index.js': POLLING })
  await t.rejects(build(t, {
    env: { REAKTOR_APPS_DIR: single },
    apps: [{ name: 'in-code', version: '1.0.0', pollingReaktors: [{ reaktorDefinitionId: 'poll', interval: '5s', createReaktor: () => () => false }] }]
  }), { message: 'reaktorDefinitionId "poll" is registered twice: by app one@1.0.0 (pollingReaktors[0]) and by app in-code@1.0.0 (pollingReaktors[0]); ids are unique across all apps' })
})

t.test('build() loads folder apps and apps given in code; code apps follow the settings rule', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'folder-app', { name: 'folder-app', version: '1.0.0', ...ESM }, { 'index.js': POLLING })
  const app = await build(t, {
    env: { REAKTOR_APPS_DIR: root, REAKTOR_SETTING_CODE_APP_LEVEL: '7' },
    apps: [{ name: 'code-app', version: '2.0.0', settings: { level: 1, label: 'x' }, reaktors: [{ reaktorDefinitionId: 'echo', createReaktor: () => (input) => input }] }]
  })
  t.same([...app.apps.pollingReaktors.keys()], ['poll'])
  t.same([...app.apps.reaktors.keys()], ['echo'])
  t.same(app.apps.findApp('code-app', '2.0.0')?.settings, { level: 7, label: 'x' })
  t.equal(app.apps.findApp('folder-app', '1.0.0')?.dir, path.join(root, 'folder-app'))
})

t.test('loadAppsFromDir: false skips the folder', async (t) => {
  const app = await build(t, { env: { REAKTOR_APPS_DIR: EXAMPLE_APPS_DIR }, loadAppsFromDir: false })
  t.equal(app.apps.pollingReaktors.size, 0)
})

t.test('the example apps in reaktor-apps/ load', async (t) => {
  const app = await build(t, { env: { REAKTOR_APPS_DIR: EXAMPLE_APPS_DIR } })
  const polling = app.apps.pollingReaktors
  t.ok(polling.has('drain-demo'), 'drain-demo is registered')
  t.ok(polling.has('heartbeat'), 'heartbeat is registered')
  t.match(polling.get('drain-demo'), { intervalMs: 10_000, registration: { autoStart: false, label: String, description: String } })
  t.match(polling.get('heartbeat'), { intervalMs: 30_000, registration: { autoStart: true } })
  t.ok(app.apps.reaktors.has('drain-demo-enqueue'))
  t.ok(app.apps.reaktors.has('drain-demo-queue'))
  const drain = app.apps.findApp('drain-demo', '1.0.0')
  t.equal(drain?.publicDir, path.join(EXAMPLE_APPS_DIR, 'drain-demo', 'public'))
  t.same(JSON.parse(await fs.readFile(path.join(EXAMPLE_APPS_DIR, 'drain-demo', 'public', '.service-external-resources.json'), 'utf8')), { allowedOrigins: [] })
  t.equal(app.apps.findApp('heartbeat', '1.0.0')?.settings.message, 'heartbeat: the reaktor service is alive')
})

t.test('settings overrides reach folder apps through the service configuration', async (t) => {
  const app = await build(t, { env: { REAKTOR_APPS_DIR: EXAMPLE_APPS_DIR, REAKTOR_SETTING_HEARTBEAT_MESSAGE: 'configured', REAKTOR_SETTING_DRAIN_DEMO_WORKMS: '5' } })
  t.equal(app.apps.findApp('heartbeat', '1.0.0')?.settings.message, 'configured')
  t.equal(app.apps.findApp('drain-demo', '1.0.0')?.settings.workMs, 5)
  t.same(app.config.appSettingsEnv, { REAKTOR_SETTING_HEARTBEAT_MESSAGE: 'configured', REAKTOR_SETTING_DRAIN_DEMO_WORKMS: '5' }, 'only REAKTOR_SETTING_* variables are kept')
})

t.test('drain-demo drains: true while items remain, false when the queue is empty', async (t) => {
  const [drain] = (await loadAppsFromDir(EXAMPLE_APPS_DIR, { REAKTOR_SETTING_DRAIN_DEMO_WORKMS: '0' }, memoryLogger())).filter((a) => a.name === 'drain-demo')
  t.equal(drain.settings.workMs, 0)
  const ctx = contextFor(drain.settings)
  const aktor = (id: string): ((input: unknown) => Promise<unknown>) => {
    const registration = drain.reaktors.find((r) => r.reaktorDefinitionId === id)
    if (registration === undefined) throw new Error(`no reaktor ${id}`)
    const created = registration.createReaktor({ settings: drain.settings })
    return async (input) => await created(input, ctx)
  }
  const run = drain.pollingReaktors[0].createReaktor()

  // Start from an empty queue, whatever ran before in this process.
  while (await run(undefined, ctx)) { /* drain */ }
  const before = await aktor('drain-demo-queue')({}) as { processed: number }
  t.equal(await run(undefined, ctx), false, 'an empty queue: no more work')

  t.match(await aktor('drain-demo-enqueue')({ count: 3 }), { added: 3, queueLength: 3 })
  const results = [await run(undefined, ctx), await run(undefined, ctx), await run(undefined, ctx), await run(undefined, ctx)]
  t.same(results, [true, true, false, false], 'true while items remain, then false')
  t.match(await aktor('drain-demo-queue')({}), { queueLength: 0, processed: before.processed + 3, lastProcessed: { id: Number } })
  await t.rejects(aktor('drain-demo-enqueue')({ count: 100_000 }), { message: /the queue holds at most 10000 items/, statusCode: 409 })
})

t.test('drain-demo: a stopped run leaves its item queued', async (t) => {
  const [drain] = (await loadAppsFromDir(EXAMPLE_APPS_DIR, {}, memoryLogger())).filter((a) => a.name === 'drain-demo')
  const controller = new AbortController()
  const ctx = { ...contextFor(drain.settings), signal: controller.signal }
  const queueState = drain.reaktors.find((r) => r.reaktorDefinitionId === 'drain-demo-queue')!.createReaktor({ settings: drain.settings })
  const enqueue = drain.reaktors.find((r) => r.reaktorDefinitionId === 'drain-demo-enqueue')!.createReaktor({ settings: drain.settings })
  const { queueLength } = await enqueue({ count: 1 }, ctx) as { queueLength: number }
  const run = (async () => await drain.pollingReaktors[0].createReaktor()(undefined, ctx))()
  controller.abort(new Error('stopped'))
  await t.rejects(run, { message: 'stopped' })
  t.match(await queueState(undefined, ctx), { queueLength })
})

t.test('heartbeat logs its message setting and never has more work', async (t) => {
  const [heartbeat] = (await loadAppsFromDir(EXAMPLE_APPS_DIR, { REAKTOR_SETTING_HEARTBEAT_MESSAGE: 'ba-dum' }, memoryLogger())).filter((a) => a.name === 'heartbeat')
  const log = memoryLogger()
  const ctx = contextFor(heartbeat.settings, log)
  const run = heartbeat.pollingReaktors[0].createReaktor()
  t.equal(await run(undefined, ctx), false)
  t.equal(await run(undefined, ctx), false)
  t.match(log.lines, [{ level: 'info', obj: { beats: Number }, msg: 'ba-dum' }, { level: 'info', obj: { beats: Number }, msg: 'ba-dum' }])
})
