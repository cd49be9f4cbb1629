import path from 'node:path'
import { performance } from 'node:perf_hooks'
import t, { type Test } from 'tap'
import { IMPORT_LIMIT_MS, loadAppsFromDir } from '../../src/apps/loader.js'
import { buildRegistry } from '../../src/apps/registry.js'
import { build } from '../helpers/app.js'
import { compiledLoader, ESM, loadError, loadInChild, POLLING, writeApp } from '../helpers/app-folder.js'
import { tempDir } from '../helpers/temp-dir.js'
import { memoryLogger } from '../helpers/log.js'
import { deadline } from '../helpers/timing.js'

/** The message buildRegistry stops the start with for an app `x` whose index.js is `body`. */
async function registryError (t: Test, body: string): Promise<string> {
  const dir = await tempDir(t)
  await writeApp(dir, 'x', { name: 'x', version: '1.0.0', ...ESM }, { 'index.js': body })
  const apps = await loadAppsFromDir(dir, {}, memoryLogger())
  try {
    buildRegistry(apps, memoryLogger())
  } catch (err) {
    return (err as Error).message
  }
  t.fail('buildRegistry accepted the app')
  return ''
}

t.test('registrations under a misspelt or other name stop the start, naming the export meant or the names read', async (t) => {
  const registration = "[{ reaktorDefinitionId: 'p', interval: '5s', createReaktor: () => () => false }]"
  const cases: Array<[string, string]> = [
    [`export const pollingReaktor = ${registration}`, 'app x@1.0.0: entry module "index.js" exports "pollingReaktor", which is not read; did you mean "pollingReaktors"?'],
    [`export const reaktor = ${registration}`, 'app x@1.0.0: entry module "index.js" exports "reaktor", which is not read; did you mean "reaktors"?'],
    [`export const PollingReaktors = ${registration}`, 'app x@1.0.0: entry module "index.js" exports "PollingReaktors", which is not read; did you mean "pollingReaktors"?'],
    [`export const pollingreaktors = ${registration}`, 'app x@1.0.0: entry module "index.js" exports "pollingreaktors", which is not read; did you mean "pollingReaktors"?'],
    [`export const aktors = ${registration}`, 'app x@1.0.0: entry module "index.js" exports "aktors", which is not read; did you mean "reaktors"?'],
    [`export const reactors = ${registration}`, 'app x@1.0.0: entry module "index.js" exports "reactors", which is not read; did you mean "reaktors"?'],
    [`export default { pollingReaktor: ${registration} }`, 'app x@1.0.0: entry module "index.js" exports a default object with "pollingReaktor", which is not read; did you mean "pollingReaktors"?'],
    [`${POLLING}\nexport const reaktor = []`, 'app x@1.0.0: entry module "index.js" exports "reaktor", which is not read; did you mean "reaktors"?'],
    [`export const pollReaktors = ${registration}`,
      'app x@1.0.0: entry module "index.js" exports "pollReaktors", which is not read; it holds registrations, but the service reads only "pollingReaktors" and "reaktors"; did you mean "pollingReaktors"?'],
    [`export const pollingActors = ${registration}`,
      'app x@1.0.0: entry module "index.js" exports "pollingActors", which is not read; it holds registrations, but the service reads only "pollingReaktors" and "reaktors"; did you mean "pollingReaktors"?'],
    [`export const jobs = ${registration}`,
      'app x@1.0.0: entry module "index.js" exports "jobs", which is not read; it holds registrations, but the service reads only "pollingReaktors" and "reaktors"']
  ]
  for (const [body, expected] of cases) {
    const root = await tempDir(t)
    await writeApp(root, 'x', { name: 'x', version: '1.0.0', ...ESM }, { 'index.js': body })
    t.equal(await loadError(t, root), expected, body)
  }
})

t.test('exports with unrelated names are fine', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'x', { name: 'x', version: '1.0.0', ...ESM }, {
    'index.js': `${POLLING}\nexport const helpers = 1\nexport function makeClient () {}\nexport const polling = true\nexport default function main () {}`
  })
  await writeApp(root, 'y', { name: 'y', version: '1.0.0', ...ESM }, { 'index.js': "export default { reaktors: [], version: 2, config: {} }" })
  const apps = await loadAppsFromDir(root, {}, memoryLogger())
  t.same(apps.map((a) => [a.name, a.pollingReaktors.length]), [['x', 1], ['y', 0]])
})

t.test('a near miss of a key under package.json "reaktor" stops the start, naming the key meant', async (t) => {
  for (const key of ['setting', 'Settings', 'setings']) {
    const root = await tempDir(t)
    await writeApp(root, 'x', { name: 'x', version: '1.0.0', ...ESM, reaktor: { [key]: { message: 'hi' } } }, { 'index.js': POLLING })
    t.equal(await loadError(t, root), `app x@1.0.0: package.json "reaktor" has the unknown key "${key}"; did you mean "settings"? (known keys: settings)`)
  }
})

t.test('other unknown keys under package.json "reaktor" are warned about; "//" comments are not', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'x', { name: 'x', version: '1.0.0', ...ESM, reaktor: { '//': 'settings are documented in README', '// note': 1, schedule: {}, settings: { a: 1 } } }, { 'index.js': POLLING })
  const log = memoryLogger()
  const [app] = await loadAppsFromDir(root, {}, log)
  t.same(app.settings, { a: 1 })
  t.same(log.lines.filter((l) => l.level === 'warn'), [{
    level: 'warn',
    obj: { app: 'x@1.0.0', keys: ['schedule'] },
    msg: 'app x@1.0.0: package.json "reaktor" has the unknown key "schedule", which is ignored (known keys: settings)'
  }])
})

t.test('a settings variable that overrides nothing is warned about, once per variable', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'foo', { name: 'foo', version: '1.0.0', ...ESM, reaktor: { settings: { message: 'a', 'bar-x': 1 } } }, { 'index.js': POLLING })
  await writeApp(root, 'foo-bar', { name: 'foo-bar', version: '2.0.0', ...ESM, reaktor: { settings: { x: 'b', limit: 5 } } }, { 'index.js': '' })
  const log = memoryLogger()
  const env = {
    REAKTOR_SETTING_FOO_MESSAGE: 'known',
    REAKTOR_SETTING_FOO_BAR_X: '2', // both foo's "bar-x" and foo-bar's "x": known
    REAKTOR_SETTING_FOO_BAR_LIMIT: '6',
    REAKTOR_SETTING_FOO_MESAGE: 'typo',
    REAKTOR_SETTING_FOO_BAR_LIMT: '7',
    REAKTOR_SETTING_FO_MESSAGE: 'no such app',
    REAKTOR_SETTING_FOO_EMPTY: ''
  }
  await loadAppsFromDir(root, env, log)
  const warnings = log.lines.filter((l) => l.level === 'warn')
  t.same(warnings, [
    {
      level: 'warn',
      obj: { variable: 'REAKTOR_SETTING_FOO_MESAGE', app: 'foo@1.0.0', closest: 'REAKTOR_SETTING_FOO_MESSAGE' },
      msg: 'REAKTOR_SETTING_FOO_MESAGE matches no setting of app foo@1.0.0, so it is ignored; did you mean REAKTOR_SETTING_FOO_MESSAGE?'
    },
    {
      level: 'warn',
      obj: { variable: 'REAKTOR_SETTING_FOO_BAR_LIMT', app: 'foo-bar@2.0.0', closest: 'REAKTOR_SETTING_FOO_BAR_LIMIT' },
      msg: 'REAKTOR_SETTING_FOO_BAR_LIMT matches no setting of app foo-bar@2.0.0, so it is ignored; did you mean REAKTOR_SETTING_FOO_BAR_LIMIT?'
    },
    {
      level: 'warn',
      obj: { variable: 'REAKTOR_SETTING_FO_MESSAGE', app: undefined, closest: 'REAKTOR_SETTING_FOO_MESSAGE' },
      msg: 'REAKTOR_SETTING_FO_MESSAGE names no loaded app, so it is ignored; did you mean REAKTOR_SETTING_FOO_MESSAGE (app foo@1.0.0)?'
    }
  ])
})

t.test('settings variables of apps given in code are known too', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'foo', { name: 'foo', version: '1.0.0', ...ESM, reaktor: { settings: { message: 'a' } } }, { 'index.js': POLLING })
  const app = await build(t, {
    env: { REAKTOR_APPS_DIR: root, REAKTOR_SETTING_CODE_APP_LEVEL: '7', REAKTOR_SETTING_CODE_APP_LEVL: '8' },
    apps: [{ name: 'code-app', version: '1.0.0', settings: { level: 1 } }]
  })
  t.equal(app.apps.findApp('code-app', '1.0.0')?.settings.level, 7)
  const log = memoryLogger()
  await loadAppsFromDir(root, { REAKTOR_SETTING_CODE_APP_LEVEL: '7', REAKTOR_SETTING_NOAPP_X: '1' }, log,
    [app.apps.findApp('code-app', '1.0.0')!])
  t.match(log.lines.filter((l) => l.level === 'warn'), [{ obj: { variable: 'REAKTOR_SETTING_NOAPP_X' } }], 'only the variable of no app')
})

t.test('a syntax error names the file, line and column, and shows the line', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'entry', { name: 'entry', version: '1.0.0', ...ESM }, { 'index.js': 'const a = 1\nexport const = a\n' })
  t.equal(await loadError(t, root),
    'app entry@1.0.0: entry module "index.js" failed to import: SyntaxError at index.js:2:14: Unexpected token \'=\'\n    export const = a\n                 ^')

  const nested = await tempDir(t)
  await writeApp(nested, 'nested', { name: 'nested', version: '1.0.0', ...ESM }, {
    'index.js': "import { x } from './lib/util.js'\nexport const reaktors = x",
    'lib/util.js': 'export const x = [\n  { reaktorDefinitionId: "a" createReaktor: () => () => 1 }\n]\n'
  })
  t.equal(await loadError(t, nested),
    'app nested@1.0.0: entry module "index.js" failed to import: SyntaxError at lib/util.js:2:30: Unexpected identifier \'createReaktor\'\n' +
    '      { reaktorDefinitionId: "a" createReaktor: () => () => 1 }\n' +
    '                                 ^^^^^^^^^^^^^')
})

t.test('a throw at the top level of the entry module names where it was thrown', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'throws', { name: 'throws', version: '1.0.0', ...ESM }, {
    'index.js': "import './setup.js'\nexport const reaktors = []",
    'setup.js': '// reads the configuration\n\nthrow new Error("no configuration")\n'
  })
  t.equal(await loadError(t, root), 'app throws@1.0.0: entry module "index.js" failed to import: no configuration (thrown at setup.js:3:7)')
})

t.test('an entry module that never finishes importing stops the start within the limit, naming the app', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'waits', { name: 'waits', version: '1.0.0', ...ESM }, {
    'index.js': "import './connect.js'\nexport const reaktors = []",
    'connect.js': 'await new Promise(() => {})\n'
  })
  const startedAt = performance.now()
  t.equal(await loadError(t, root), `app waits@1.0.0: entry module "index.js" did not finish importing within ${IMPORT_LIMIT_MS / 1000} s ` +
    '(a top-level await that never settles? Slow work, such as connecting somewhere, belongs in the aktor, on its first run)')
  t.ok(performance.now() - startedAt >= IMPORT_LIMIT_MS - 50, 'after the limit, not before')
})

t.test('an interval or timeout of the wrong type says what was expected and what was given', async (t) => {
  const poll = (fields: string): string => `export const pollingReaktors = [{ reaktorDefinitionId: 'p', ${fields} createReaktor: () => () => false }]`
  const cases: Array<[string, string]> = [
    [poll('interval: 5000,'), 'app x@1.0.0: polling reaktor "p": interval must be a duration string such as "30s"; got the number 5000 (for 5000 ms write "5000ms" or "5s")'],
    [poll('interval: 250,'), 'app x@1.0.0: polling reaktor "p": interval must be a duration string such as "30s"; got the number 250 (for 250 ms write "250ms")'],
    [poll('interval: true,'), 'app x@1.0.0: polling reaktor "p": interval must be a duration string such as "30s"; got the boolean true'],
    [poll('interval: { seconds: 5 },'), 'app x@1.0.0: polling reaktor "p": interval must be a duration string such as "30s"; got an object'],
    [poll(''), 'app x@1.0.0: polling reaktor "p" has no interval; expected a duration string such as "30s"'],
    [poll("interval: '5s', timeout: 60000,"), 'app x@1.0.0: polling reaktor "p": timeout must be a duration string such as "30s"; got the number 60000 (for 60000 ms write "60000ms" or "60s")'],
    ["export const reaktors = [{ reaktorDefinitionId: 'r', timeout: [30], createReaktor: () => () => 1 }]",
      'app x@1.0.0: reaktor "r": timeout must be a duration string such as "30s"; got an array']
  ]
  for (const [body, expected] of cases) t.equal(await registryError(t, body), expected, body)
})

t.test('a reaktorDefinitionId used twice names where each registration is', async (t) => {
  t.equal(await registryError(t, `${POLLING}\nexport const reaktors = [{ reaktorDefinitionId: 'poll', createReaktor: () => () => 1 }]`),
    'reaktorDefinitionId "poll" is registered twice in app x@1.0.0 (pollingReaktors[0] and reaktors[0]); give each registration its own id')

  const root = await tempDir(t)
  await writeApp(root, 'one', { name: 'one', version: '1.0.0', ...ESM }, { 'index.js': POLLING })
  await writeApp(root, 'two', { name: 'two', version: '1.0.0', ...ESM }, { 'index.js': `export const reaktors = [{ reaktorDefinitionId: 'other', createReaktor: () => () => 1 }, { reaktorDefinitionId: 'poll', createReaktor: () => () => 1 }]` })
  const apps = await loadAppsFromDir(root, {}, memoryLogger())
  t.throws(() => buildRegistry(apps, memoryLogger()), {
    message: 'reaktorDefinitionId "poll" is registered twice: by app one@1.0.0 (pollingReaktors[0]) and by app two@1.0.0 (reaktors[1]); ids are unique across all apps'
  })
})

t.test('the same name@version in two folders names both folders', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'copy-a', { name: 'same', version: '1.0.0', ...ESM }, { 'index.js': '' })
  await writeApp(root, 'copy-b', { name: 'same', version: '1.0.0', ...ESM }, { 'index.js': '' })
  const apps = await loadAppsFromDir(root, {}, memoryLogger())
  t.throws(() => buildRegistry(apps, memoryLogger()), {
    message: `app same@1.0.0 is loaded twice: from folder ${path.join(root, 'copy-a')} and from folder ${path.join(root, 'copy-b')}; remove one or give it another version`
  })
  await t.rejects(build(t, { env: { REAKTOR_APPS_DIR: root }, loadAppsFromDir: false, apps: [{ name: 'c', version: '1' }, { name: 'c', version: '1' }] }), {
    message: 'app c@1 is loaded twice: from app no. 1 given in code without a folder and from app no. 2 given in code without a folder; remove one or give it another version'
  })
})

t.test('a missing entry module says which main was read and suggests a file that exists', async (t) => {
  const cases: Array<[Record<string, unknown>, Record<string, string>, (dir: string) => string]> = [
    [{ main: 'dist/main.js' }, { 'dist/index.js': '', 'README.md': '' },
      (dir) => `app x@1.0.0: entry module "dist/main.js" not found in ${dir} (read from package.json "main"); did you mean "dist/index.js"? Set "main" in package.json to the entry module`],
    [{}, { 'src/index.ts': '' },
      (dir) => `app x@1.0.0: entry module "index.js" not found in ${dir} (package.json has no "main", so the default index.js was assumed); did you mean "src/index.ts"? Set "main" in package.json to the entry module`],
    [{}, { 'app.mjs': '' },
      (dir) => `app x@1.0.0: entry module "index.js" not found in ${dir} (package.json has no "main", so the default index.js was assumed); did you mean "app.mjs"? Set "main" in package.json to the entry module`],
    [{ main: 'start.js' }, {},
      (dir) => `app x@1.0.0: entry module "start.js" not found in ${dir} (read from package.json "main"); create it or set "main" to the entry module`]
  ]
  for (const [extra, files, expected] of cases) {
    const root = await tempDir(t)
    const dir = await writeApp(root, 'x', { name: 'x', version: '1.0.0', ...ESM, ...extra }, files)
    t.equal(await loadError(t, root), expected(dir))
  }
})

t.test('under plain node: no "type": "module" gives one structured warning and no raw lines on stderr', async (t) => {
  const loader = await compiledLoader(t)
  const root = await tempDir(t)
  await writeApp(root, 'typeless', { name: 'typeless', version: '1.0.0' }, { 'index.js': POLLING })
  await writeApp(root, 'typed', { name: 'typed', version: '1.0.0', ...ESM }, { 'index.js': POLLING.replace("'poll'", "'poll-2'") })
  const { stderr, lines } = await loadInChild(loader, root)
  t.equal(stderr, '', 'Node printed nothing of its own')
  t.same(lines.filter((l) => l.level === 'warn'), [{
    level: 'warn',
    obj: { app: 'typeless@1.0.0', files: ['index.js'], packageJson: path.join(root, 'typeless', 'package.json') },
    msg: 'app typeless@1.0.0: package.json has no "type": "module", so Node reparses index.js as ES module on every start; add "type": "module" to package.json'
  }])
  t.match(lines.filter((l) => l.level === 'info'), [{ obj: { app: 'typed@1.0.0', pollingReaktors: 1 } }, { obj: { app: 'typeless@1.0.0', pollingReaktors: 1 } }])
})

t.test('under plain node: other files keep Node\'s own warning', async (t) => {
  const loader = await compiledLoader(t)
  const root = await tempDir(t)
  const outside = await tempDir(t)
  await writeApp(outside, 'shared', { name: 'shared' }, { 'index.js': 'export const helper = 1' })
  await writeApp(root, 'x', { name: 'x', version: '1.0.0', ...ESM }, { 'index.js': `import '${path.join(outside, 'shared', 'index.js')}'\n${POLLING}` })
  const { stderr, lines } = await loadInChild(loader, root)
  t.match(stderr, /\[MODULE_TYPELESS_PACKAGE_JSON\] Warning: Module type of file:\/\/.*shared\/index\.js is not specified/)
  t.same(lines.filter((l) => l.level === 'warn'), [], 'not logged as an app\'s problem')
})

/** Whether this Node loads erasable TypeScript itself (Node 23.6 and later strip types by default). */
const nodeLoadsTypeScript = Boolean((process.features as { typescript?: unknown }).typescript)

t.test('under plain node: a TypeScript main says how to run it, unless Node loads it itself', async (t) => {
  const loader = await compiledLoader(t)
  const root = await tempDir(t)
  await writeApp(root, 'x', { name: 'x', version: '1.0.0', ...ESM, main: 'src/index.ts' }, { 'src/index.ts': `export const reaktors: unknown[] = []\n${POLLING}` })
  const { lines } = await loadInChild(loader, root)
  if (nodeLoadsTypeScript) {
    t.match(lines, [{ level: 'info', obj: { app: 'x@1.0.0', pollingReaktors: 1 } }], 'loaded as it is')
    return
  }
  t.same(lines.filter((l) => l.level === 'error').map((l) => l.msg), [
    'app x@1.0.0: entry module "src/index.ts" failed to import: src/index.ts is TypeScript, which this process cannot load. `npm run dev` runs the service under tsx, which loads it; ' +
    'for production, compile the app to JavaScript and point "main" in package.json at the compiled file'
  ])
})

t.test('exports that are not registrations are the app\'s own, whatever their names', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'x', { name: 'x', version: '1.0.0', ...ESM }, {
    'index.js': `${POLLING}\nexport const reaktors = []\nexport const aktors = { greet: () => 1 }\nexport class Reaktor {}\n` +
      "export const REAKTORS = ['a', 'b']\nexport const reactor = 'r'\nexport const items = []"
  })
  await writeApp(root, 'y', { name: 'y', version: '1.0.0', main: 'index.cjs' }, {
    'index.cjs': "exports.Reaktor = class {}\nexports.reaktors = [{ reaktorDefinitionId: 'y', createReaktor: () => () => 1 }]"
  })
  const apps = await loadAppsFromDir(root, {}, memoryLogger())
  t.same(apps.map((a) => [a.name, a.pollingReaktors.length, a.reaktors.length]), [['x', 1, 0], ['y', 0, 1]])
})

t.test('exports that cannot be listed, and errors whose stack cannot be read, still give a message naming the app', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'proxy', { name: 'proxy', version: '1.0.0', ...ESM }, {
    'index.js': `${POLLING}\nexport default new Proxy({}, { ownKeys () { throw new Error('no keys') } })`
  })
  const apps = await loadAppsFromDir(root, {}, memoryLogger())
  t.same(apps.map((a) => [a.name, a.pollingReaktors.length]), [['proxy', 1]], 'the export check is passed over')

  const stackless = await tempDir(t)
  await writeApp(stackless, 'x', { name: 'x', version: '1.0.0', ...ESM }, {
    'index.js': "const err = new Error('boom')\nObject.defineProperty(err, 'stack', { get () { throw new Error('no stack') } })\nthrow err"
  })
  t.equal(await loadError(t, stackless), 'app x@1.0.0: entry module "index.js" failed to import: boom')

  const getter = await tempDir(t)
  await writeApp(getter, 'x', { name: 'x', version: '1.0.0', ...ESM }, {
    'index.js': "export default { get pollingReaktors () { throw new Error('not yet') } }"
  })
  t.equal(await loadError(t, getter), 'app x@1.0.0: the exports of entry module "index.js" cannot be read: not yet')
})

t.test('a syntax error is looked for in the files the import loaded, not in browser scripts or stale copies', async (t) => {
  const root = await tempDir(t)
  const broken = 'export const x = [\n  { reaktorDefinitionId: "a" createReaktor: () => () => 1 }\n]\n'
  await writeApp(root, 'x', { name: 'x', version: '1.0.0', ...ESM }, {
    'index.js': "import { x } from './lib/util.js'\nexport const reaktors = x",
    'a-old/util.js': broken,
    'lib/util.js': `// the one in use\n${broken}`,
    'public/app.js': broken
  })
  t.equal(await loadError(t, root),
    'app x@1.0.0: entry module "index.js" failed to import: SyntaxError at lib/util.js:3:30: Unexpected identifier \'createReaktor\'\n' +
    '      { reaktorDefinitionId: "a" createReaktor: () => () => 1 }\n' +
    '                                 ^^^^^^^^^^^^^')
})

t.test('a SyntaxError thrown by running code names where it was thrown', async (t) => {
  for (const [line, column, code] of [[2, 6, "JSON.parse('{')"], [3, 1, "new RegExp('(')"]] as const) {
    const root = await tempDir(t)
    await writeApp(root, 'x', { name: 'x', version: '1.0.0', ...ESM }, {
      'index.js': "import './setup.js'\nexport const reaktors = []",
      'setup.js': `// reads the configuration\n${line === 3 ? '\n' : ''}${code}\n`
    })
    // The message is Node's own and differs between versions; the place is ours.
    t.match(await loadError(t, root), new RegExp(`^app x@1\\.0\\.0: entry module "index\\.js" failed to import: .+ \\(thrown at setup\\.js:${line}:${column}\\)$`), code)
  }
})

t.test('a throw in an app folder whose path has parentheses names where it was thrown', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'x (copy)', { name: 'x', version: '1.0.0', ...ESM }, { 'index.js': '\nthrow new Error("no configuration")\n' })
  t.equal(await loadError(t, root), 'app x@1.0.0: entry module "index.js" failed to import: no configuration (thrown at index.js:2:7)')
})

t.test('a missing entry module suggests only a likely file; a folder as main gets its index module', async (t) => {
  const root = await tempDir(t)
  const dir = await writeApp(root, 'x', { name: 'x', version: '1.0.0', ...ESM, main: 'dist/server.js' }, { 'eslint.config.js': '', 'README.md': '' })
  t.equal(await loadError(t, root), `app x@1.0.0: entry module "dist/server.js" not found in ${dir} (read from package.json "main"); create it or set "main" to the entry module`)

  const folder = await tempDir(t)
  await writeApp(folder, 'x', { name: 'x', version: '1.0.0', ...ESM, main: 'dist' }, { 'dist/index.js': POLLING })
  t.equal(await loadError(t, folder), 'app x@1.0.0: entry module "dist" is a folder, not a module (read from package.json "main"); did you mean "dist/index.js"? Set "main" in package.json to the entry module')
})

t.test('settings variables of two apps of one name, of apps given in code, and far typos', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'foo-1', { name: 'foo', version: '1.0.0', ...ESM, reaktor: { settings: { message: 'a' } } }, { 'index.js': '' })
  await writeApp(root, 'foo-2', { name: 'foo', version: '2.0.0', ...ESM, reaktor: { settings: { message: 'b' } } }, { 'index.js': '' })
  await writeApp(root, 'billing', { name: 'billing', version: '1.0.0', ...ESM, reaktor: { settings: { apiUrl: 'x' } } }, { 'index.js': '' })
  const log = memoryLogger()
  const codeApp = { name: 'code-app', version: '1.0.0', dir: undefined, settings: {} }
  await loadAppsFromDir(root, { REAKTOR_SETTING_FOO_MESAGE: '1', REAKTOR_SETTING_WEATHER_TOKEN: 'x', REAKTOR_SETTING_CODE_APP_LEVEL: '2' }, log,
    [{ ...codeApp, publicDir: undefined, pollingReaktors: [], reaktors: [] }])
  t.same(log.lines.filter((l) => l.level === 'warn').map((l) => l.msg), [
    'REAKTOR_SETTING_FOO_MESAGE matches no setting of app foo@1.0.0 or foo@2.0.0, so it is ignored; did you mean REAKTOR_SETTING_FOO_MESSAGE?',
    'REAKTOR_SETTING_WEATHER_TOKEN names no loaded app (loaded: billing@1.0.0, foo@1.0.0, foo@2.0.0, code-app@1.0.0), so it is ignored',
    'REAKTOR_SETTING_CODE_APP_LEVEL matches no setting of app code-app@1.0.0 (it was given in code without settings), so it is ignored'
  ])
})

t.test('under plain node: a nested package.json without "type" is named in the warning; a dependency is passed over', async (t) => {
  const loader = await compiledLoader(t)
  const root = await tempDir(t)
  await writeApp(root, 'x', { name: 'x', version: '1.0.0', ...ESM }, {
    'index.js': `import './vendor/lib/index.js'\nimport 'dep'\n${POLLING}`,
    'vendor/lib/package.json': '{}',
    'vendor/lib/index.js': 'export const lib = 1',
    'node_modules/dep/package.json': JSON.stringify({ name: 'dep', main: 'index.js' }),
    'node_modules/dep/index.js': 'export const dep = 1'
  })
  const { stderr, lines } = await loadInChild(loader, root)
  t.equal(stderr, '', 'Node printed nothing of its own')
  const app = path.join(root, 'x')
  t.same(lines.filter((l) => l.level === 'warn'), [{
    level: 'warn',
    obj: { app: 'x@1.0.0', files: ['vendor/lib/index.js'], packageJson: path.join(app, 'vendor', 'lib', 'package.json') },
    msg: 'app x@1.0.0: vendor/lib/package.json has no "type": "module", so Node reparses vendor/lib/index.js as ES module on every start; add "type": "module" to vendor/lib/package.json'
  }])
  t.same(lines.map((l) => l.level), ['warn', 'info'], 'nothing for the dependency: Node warns for no file under node_modules')
})

t.test('under plain node: a syntax error in a package without "type": "module" is located too', async (t) => {
  const loader = await compiledLoader(t)
  const root = await tempDir(t)
  await writeApp(root, 'x', { name: 'x', version: '1.0.0' }, {
    'index.js': "import { x } from './lib/util.js'\nexport const reaktors = x",
    'lib/util.js': 'export const x = [\n  { reaktorDefinitionId: "a" createReaktor: () => () => 1 }\n]\n'
  })
  const { lines } = await loadInChild(loader, root)
  t.same(lines.filter((l) => l.level === 'error').map((l) => l.msg), [
    'app x@1.0.0: entry module "index.js" failed to import: SyntaxError at lib/util.js:2:30: Unexpected identifier \'createReaktor\'\n' +
    '      { reaktorDefinitionId: "a" createReaktor: () => () => 1 }\n' +
    '                                 ^^^^^^^^^^^^^'
  ])
})

t.test('under plain node: hooks that cannot be registered fail each load with the reason, and never hang', async (t) => {
  const loader = await compiledLoader(t)
  const root = await tempDir(t)
  await writeApp(root, 'x', { name: 'x', version: '1.0.0', ...ESM }, { 'index.js': POLLING })
  // As under the permission model without --allow-worker (Node 24's --permission), which forbids
  // the hooks thread; the test runner's own preload cannot run under that model.
  const prelude = `
    import module from 'node:module'
    module.register = () => { throw new Error('Access to this API has been restricted. Use --allow-worker to manage permissions.') }
    module.syncBuiltinESMExports()`
  const { lines } = await loadInChild(loader, root, { prelude, runs: 2, timeoutMs: deadline(10_000) })
  const expected = /^app x@1\.0\.0: entry module "index\.js" failed to import: the module hooks that let apps import reaktor-service\/sdk cannot be registered: Access to this API has been restricted/
  t.match(lines, [{ level: 'error', msg: expected }, { level: 'error', msg: expected }])
  t.equal(lines.length, 2)
})
