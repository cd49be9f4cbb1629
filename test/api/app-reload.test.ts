/**
 * Reloading an app folder in place (the dev loop's reload, src/dev/app-reload.ts, on the loader's
 * fresh loads): every file of the app is imported afresh, its dependencies and the SDK are not; a
 * started reaktor keeps running on the new code; code that does not load is reported as a start
 * reports it (file, line, reason, caret: also where tsx's own lexer stops first) and the previous
 * version keeps running; what a switch cannot do asks for a restart.
 */
import fs from 'node:fs/promises'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import t from 'tap'
import { loadApp } from '../../src/apps/loader.js'
import { reloadAppFolder } from '../../src/dev/app-reload.js'
import * as sdk from '../../src/sdk/index.js'
import { ADMIN_ENV, loggedIn } from '../helpers/auth.js'
import { buildLogged } from '../helpers/app.js'
import { ESM, loadError, writeApp } from '../helpers/app-folder.js'
import { memoryLogger } from '../helpers/log.js'
import { tempDir } from '../helpers/temp-dir.js'
import { waitFor } from '../helpers/timing.js'

/** The answer of the app's first aktor, called as the service calls it. */
async function answerOf (app: Awaited<ReturnType<typeof loadApp>>): Promise<unknown> {
  const aktor = app.reaktors[0].createReaktor({ settings: app.settings }) as (input: unknown, context: unknown) => Promise<unknown>
  return await aktor({}, {})
}

t.test('a fresh load imports every file of the app again, and neither its dependencies nor the SDK', async (t) => {
  const root = await tempDir(t)
  const files = (n: number): Record<string, string> => ({
    'index.js': "import { v, later } from './lib/v.js'\nimport dep from 'dep'\nexport { defineApp } from 'reaktor-service/sdk'\nexport { dep }\n" +
      'export const reaktors = [{ reaktorDefinitionId: \'a\', createReaktor: () => async () => `${v} ${await later()}` }]\n',
    'lib/v.js': `export const v = 'v${n}'\nexport const later = async () => (await import('./lazy.js')).lazy\n`,
    'lib/lazy.js': `export const lazy = 'lazy${n}'\n`,
    'node_modules/dep/package.json': JSON.stringify({ name: 'dep', version: '1.0.0', type: 'module', main: 'index.js' }),
    'node_modules/dep/index.js': `globalThis.reaktorReloadDepLoads = (globalThis.reaktorReloadDepLoads ?? 0) + 1\nexport default { n: ${n} }\n`
  })
  const dir = await writeApp(root, 'esm', { name: 'esm', version: '1.0.0', ...ESM }, files(1))
  const first = await loadApp(dir, {}, memoryLogger())
  t.equal(await answerOf(first), 'v1 lazy1')
  for (const n of [2, 3]) {
    await writeApp(root, 'esm', undefined, files(n))
    const again = await loadApp(dir, {}, memoryLogger())
    t.equal(await answerOf(again), 'v1 lazy1', 'a load that is not fresh gets the modules Node imported before')
    const fresh = await loadApp(dir, {}, memoryLogger(), { fresh: true })
    t.equal(await answerOf(fresh), `v${n} lazy${n}`, `fresh load ${n}: the entry, the files it imports and those it imports later are the new ones`)
  }
  const fresh = await import(`${pathToFileURL(path.join(dir, 'index.js')).href}?reaktor-reload=999999`) as Record<string, unknown>
  t.same(fresh.dep, { n: 1 }, 'a dependency under node_modules is the instance first imported')
  t.equal((globalThis as { reaktorReloadDepLoads?: number }).reaktorReloadDepLoads, 1, 'and it ran once')
  t.equal(fresh.defineApp, sdk.defineApp, "the SDK is the service's own instance")
})

t.test('a fresh load runs CommonJS and TypeScript files afresh too', async (t) => {
  const root = await tempDir(t)
  const cjs = (n: number): Record<string, string> => ({
    'index.cjs': "const { v } = require('./lib.cjs')\nexports.reaktors = [{ reaktorDefinitionId: 'c', createReaktor: () => async () => v }]\n",
    'lib.cjs': `exports.v = 'cjs${n}'\n`
  })
  const ts = (n: number): Record<string, string> => ({
    'index.ts': "import { v } from './lib.js'\nexport const reaktors = [{ reaktorDefinitionId: 't', createReaktor: () => async (): Promise<string> => v }]\n",
    'lib.ts': `export const v: string = 'ts${n}'\n`
  })
  const cjsDir = await writeApp(root, 'cjs', { name: 'cjs', version: '1.0.0', main: 'index.cjs' }, cjs(1))
  const tsDir = await writeApp(root, 'ts', { name: 'ts', version: '1.0.0', ...ESM, main: 'index.ts' }, ts(1))
  t.equal(await answerOf(await loadApp(cjsDir, {}, memoryLogger())), 'cjs1')
  t.equal(await answerOf(await loadApp(tsDir, {}, memoryLogger())), 'ts1')
  await writeApp(root, 'cjs', undefined, cjs(2))
  await writeApp(root, 'ts', undefined, ts(2))
  t.equal(await answerOf(await loadApp(cjsDir, {}, memoryLogger(), { fresh: true })), 'cjs2', 'a required file is required afresh')
  t.equal(await answerOf(await loadApp(tsDir, {}, memoryLogger(), { fresh: true })), 'ts2', 'a TypeScript file imported as .js is imported afresh')
})

t.test('a syntax error is located with its line and caret, in a module tsx reads first and in TypeScript too', async (t) => {
  const root = await tempDir(t)
  // tsx lexes an ES module that imports anything, and its lexer stops with "Parse error <file>:1:1".
  await writeApp(root, 'x', { name: 'x', version: '1.0.0', ...ESM }, {
    'index.js': "import path from 'node:path'\nexport const reaktors = [\n  { reaktorDefinitionId: 'a', createReaktor: () => async () => path.join('a' }\n]\n"
  })
  t.equal(await loadError(t, root),
    'app x@1.0.0: entry module "index.js" failed to import: SyntaxError at index.js:3:74: missing ) after argument list\n' +
    "      { reaktorDefinitionId: 'a', createReaktor: () => async () => path.join('a' }\n" +
    `${' '.repeat(4 + 73)}^^^`)

  const ended = await tempDir(t)
  await writeApp(ended, 'x', { name: 'x', version: '1.0.0', ...ESM }, { 'index.js': 'export const reaktors = [\n' })
  t.equal(await loadError(t, ended), 'app x@1.0.0: entry module "index.js" failed to import: SyntaxError at index.js:2: Unexpected end of input',
    'the end of the file: the line Node names, without a column it does not give')

  const typed = await tempDir(t)
  await writeApp(typed, 'x', { name: 'x', version: '1.0.0', ...ESM, main: 'index.ts' }, {
    'index.ts': "const greeting: string = 'hi'\nexport const reaktors = [{ reaktorDefinitionId: 'a', createReaktor: () => async () => String(greeting }]\n"
  })
  t.equal(await loadError(t, typed),
    'app x@1.0.0: entry module "index.ts" failed to import: SyntaxError at index.ts:2:103: Expected ")" but found "}"\n' +
    "    export const reaktors = [{ reaktorDefinitionId: 'a', createReaktor: () => async () => String(greeting }]\n" +
    `${' '.repeat(4 + 102)}^`, "esbuild's error, shown as Node shows one")
})

const POLLER = "{ reaktorDefinitionId: 'poller', interval: '50ms', createReaktor: () => async () => { globalThis.reaktorReloadRuns = (globalThis.reaktorReloadRuns ?? 0) + 1; return false } }"
const appModule = (answer: string): string =>
  `export const pollingReaktors = [${POLLER}]\nexport const reaktors = [{ reaktorDefinitionId: 'answer', createReaktor: () => async () => ${JSON.stringify(answer)} }]\n`

t.test('a reload in place: a started reaktor keeps running, the aktor answers the new code, a broken version leaves the old one running', async (t) => {
  const root = await tempDir(t)
  const dir = await writeApp(root, 'live', { name: 'live', version: '1.0.0', ...ESM }, { 'index.js': appModule('one') })
  await writeApp(root, 'other', { name: 'other', version: '1.0.0', ...ESM }, { 'index.js': "export const reaktors = [{ reaktorDefinitionId: 'taken', createReaktor: () => async () => 1 }]" })
  const { app, lines } = await buildLogged(t, { ...ADMIN_ENV, REAKTOR_APPS_DIR: root }, [])
  const call = await loggedIn(app)
  const log = memoryLogger()
  const reload = async (): Promise<unknown> => await reloadAppFolder(dir, { catalog: app.appCatalog, env: {}, log })
  const answer = async (): Promise<unknown> => (await call('POST', '/api/v1/aktor/answer', {})).body
  const runs = (): number => (globalThis as { reaktorReloadRuns?: number }).reaktorReloadRuns ?? 0

  t.equal((await call('POST', '/api/v1/polling/poller/start')).statusCode, 200)
  const owner = await waitFor(async () => (await call('GET', '/api/v1/polling/poller/status')).body.owner as string | null, { what: 'the started reaktor to have an owner' })
  for (const next of ['two', 'three']) {
    await fs.writeFile(path.join(dir, 'index.js'), appModule(next))
    t.same(await reload(), { outcome: 'reloaded', app: 'live@1.0.0' })
    t.equal(await answer(), next, `the aktor answers ${next} at once`)
    const before = runs()
    await waitFor(() => runs() > before, { what: 'the poller to run on' })
    t.match((await call('GET', '/api/v1/polling/poller/status')).body, { state: 'running', owner }, 'the started reaktor runs on, on the same owner')
  }
  t.match(log.lines, [{ level: 'info', msg: 'app live@1.0.0 reloaded in place', obj: { changed: ['poller'] } }, { level: 'info' }])

  const lineCount = log.lines.length
  await fs.writeFile(path.join(dir, 'index.js'), "export const reaktors = [\n  { reaktorDefinitionId: 'answer', createReaktor: () => async () => String('four' }\n]\n")
  t.same(await reload(), { outcome: 'failed', app: 'live@1.0.0' })
  t.same(log.lines.slice(lineCount).map((l) => [l.level, l.msg]), [['error',
    'app live@1.0.0 was not reloaded; it keeps running the version it ran: app live@1.0.0: entry module "index.js" failed to import: ' +
    "SyntaxError at index.js:2:76: missing ) after argument list\n      { reaktorDefinitionId: 'answer', createReaktor: () => async () => String('four' }\n" +
    `${' '.repeat(4 + 75)}^^^^^^`]], 'the error as a start says it: file, line, reason, caret')
  t.equal(await answer(), 'three', 'the previous version keeps answering')

  await fs.writeFile(path.join(dir, 'index.js'), "export const reaktors = [{ reaktorDefinitionId: 'taken', createReaktor: () => async () => 2 }]")
  t.same(await reload(), { outcome: 'failed', app: 'live@1.0.0' }, 'a version a start would refuse (an id of another app)')
  t.match(log.lines.at(-1)?.msg, /^app live@1\.0\.0 was not reloaded; it keeps running the version it ran: reaktorDefinitionId "taken" is registered twice/)
  t.equal(await answer(), 'three')
  t.match((await call('GET', '/api/v1/polling/poller/status')).body, { state: 'running', owner })

  await fs.writeFile(path.join(dir, 'index.js'), appModule('fixed'))
  t.same(await reload(), { outcome: 'reloaded', app: 'live@1.0.0' }, 'the fix reloads')
  t.equal(await answer(), 'fixed')
  t.notOk(lines.some((line) => line.includes('"level":50')), "the service's own log has no error")
})

t.test('what a switch cannot do asks for a restart', async (t) => {
  const root = await tempDir(t)
  const dir = await writeApp(root, 'live', { name: 'live', version: '1.0.0', ...ESM }, { 'index.js': appModule('one') })
  const { app } = await buildLogged(t, { ...ADMIN_ENV, REAKTOR_APPS_DIR: root }, [])
  const log = memoryLogger()
  const reload = async (folder: string): Promise<unknown> => await reloadAppFolder(folder, { catalog: app.appCatalog, env: {}, log })

  const fresh = await writeApp(root, 'new-app', { name: 'new-app', version: '1.0.0', ...ESM }, { 'index.js': 'export const reaktors = []' })
  t.same(await reload(fresh), { outcome: 'restart', reason: `no app runs from ${fresh} yet` }, 'a folder no app runs from')
  await writeApp(root, 'live', { name: 'live', version: '1.0.1', ...ESM })
  t.same(await reload(dir), { outcome: 'restart', reason: 'its package.json now names live@1.0.1, not live@1.0.0' }, 'a new version (its UI URL is set at start)')
  await writeApp(root, 'live', { name: 'live', version: '1.0.0', ...ESM }, { 'public/index.html': '<p>' })
  t.same(await reload(dir), { outcome: 'restart', reason: 'its public/ folder appeared' }, 'a UI appearing')
  await fs.rm(dir, { recursive: true })
  t.same(await reload(dir), { outcome: 'restart', reason: `${dir} is gone` }, 'an app folder gone')
  t.equal(app.appCatalog.app('live')?.version, '1.0.0', 'none of them changed what runs')
  t.same(log.lines.filter((l) => l.level === 'error'), [])
})
