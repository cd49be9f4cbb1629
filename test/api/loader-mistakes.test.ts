import path from 'node:path'
import t, { type Test } from 'tap'
import { loadAppsFromDir } from '../../src/apps/loader.js'
import { buildRegistry } from '../../src/apps/registry.js'
import { build } from '../helpers/app.js'
import { compiledLoader, ESM, loadError, loadInChild, POLLING, writeApp } from '../helpers/app-folder.js'
import { tempDir } from '../helpers/context.js'
import { memoryLogger } from '../helpers/log.js'

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

t.test('a misspelt pollingReaktors or reaktors export stops the start, naming the export meant', async (t) => {
  const registration = "[{ reaktorDefinitionId: 'p', interval: '5s', createReaktor: () => () => false }]"
  const cases: Array<[string, string]> = [
    [`export const pollingReaktor = ${registration}`, 'app x@1.0.0: entry module "index.js" exports "pollingReaktor", which is not read; did you mean "pollingReaktors"?'],
    [`export const reaktor = ${registration}`, 'app x@1.0.0: entry module "index.js" exports "reaktor", which is not read; did you mean "reaktors"?'],
    [`export const PollingReaktors = ${registration}`, 'app x@1.0.0: entry module "index.js" exports "PollingReaktors", which is not read; did you mean "pollingReaktors"?'],
    [`export const pollingreaktors = ${registration}`, 'app x@1.0.0: entry module "index.js" exports "pollingreaktors", which is not read; did you mean "pollingReaktors"?'],
    [`export const aktors = ${registration}`, 'app x@1.0.0: entry module "index.js" exports "aktors", which is not read; did you mean "reaktors"?'],
    [`export const reactors = ${registration}`, 'app x@1.0.0: entry module "index.js" exports "reactors", which is not read; did you mean "reaktors"?'],
    [`export default { pollingReaktor: ${registration} }`, 'app x@1.0.0: entry module "index.js" exports a default object with "pollingReaktor", which is not read; did you mean "pollingReaktors"?'],
    [`${POLLING}\nexport const reaktor = []`, 'app x@1.0.0: entry module "index.js" exports "reaktor", which is not read; did you mean "reaktors"?']
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

t.test('an unknown key under package.json "reaktor" stops the start, naming the key meant', async (t) => {
  const root = await tempDir(t)
  await writeApp(root, 'x', { name: 'x', version: '1.0.0', ...ESM, reaktor: { setting: { message: 'hi' } } }, { 'index.js': POLLING })
  t.equal(await loadError(t, root), 'app x@1.0.0: package.json "reaktor" has the unknown key "setting"; did you mean "settings"? (known keys: settings)')
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
    message: 'app c@1 is loaded twice: from an app given in code and from an app given in code; remove one or give it another version'
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
