import fs from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { Argument } from 'commander'
import { isPackageName } from '../../apps/loader.js'
import { DEFAULT_URL } from '../client.js'
import { CliError, EXIT, nonEmpty, type CliContext, type CommandModule, type ExitCode } from '../context.js'
import { printable, printJson, shellWord } from '../output.js'
import { planApp, type AppPlan } from '../app-plan.js'
import { shownPath } from '../../lib/shown-path.js'
import { appFiles } from '../scaffold.js'
import { planTests, runTests } from '../app-tests.js'
import { ensureAppsDir, refuseClashes, writeApp } from '../app-write.js'

// npm's own limit; the loader's rule does not bound the length.
const MAX_NAME_LENGTH = 214

/** The service's checkout or install: the `reaktor` launcher a new app's `npm test` runs is in its bin/. */
const SERVICE_ROOT = fileURLToPath(new URL('../../../', import.meta.url))

/** What is wrong with `name` as a new app's name, if anything. */
function nameProblem (name: string): string | undefined {
  if (name.length > MAX_NAME_LENGTH) return `is longer than ${MAX_NAME_LENGTH} characters`
  if (!isPackageName(name)) return 'is not a valid package name: lower case letters, digits, - . _ ~, not starting with . or _, optionally @scope/ (e.g. my-app, @acme/widgets)'
  // The loader passes over a folder of this name.
  if (name === 'node_modules') return 'is the one folder name the service never loads apps from'
  // Every command would read it as an option.
  if (name.startsWith('-')) return 'starts with -, which commands take for an option'
  return undefined
}

function checkName (name: string): void {
  const problem = nameProblem(name)
  if (problem !== undefined) throw new CliError(EXIT.usage, `app name ${JSON.stringify(name)} ${problem}`)
}

function nextSteps (context: CliContext, plan: AppPlan, dir: string, files: string[], ui: boolean, testCommand: string, notes: string[]): string {
  const base = (context.io.env.REAKTOR_URL ?? DEFAULT_URL).replace(/\/+$/, '')
  const steps = [
    'Restart the service to load it (or run `npm run dev`, which reloads the app in place on each save).',
    ...(ui ? [`Open its UI: ${base}${plan.uiPath}`] : []),
    `Call the aktor: curl -X POST -H "X-Service-Token: $TOKEN" -H 'Content-Type: application/json' -d '{"name":"Ada"}' ${shellWord(`${base}/api/v1/aktor/${plan.aktorId}`)}`,
    `Start the poller: npx reaktor polling start ${shellWord(plan.pollingId)}`,
    `Edit ${shellWord(path.join(shownPath(dir), 'index.js'))}, then run its tests: ${testCommand}`
  ]
  return `Created the reaktor app ${plan.name} in ${shownPath(dir)}:\n${files.map((f) => `  ${f}\n`).join('')}\nNext steps:\n` +
    steps.map((s, i) => `  ${i + 1}. ${s}\n`).join('') + (notes.length === 0 ? '' : `\n${notes.map((n) => `Note: ${n}\n`).join('')}`)
}

/** `npm test` of the app: this service's launcher, by a relative path inside the checkout (which may then move). */
export function npmTestScript (dir: string, root = SERVICE_ROOT): { script: string, tiedTo?: string } {
  const bin = path.join(root, 'bin', 'reaktor.js')
  const inside = !path.relative(root, dir).startsWith('..')
  const launcher = inside ? path.relative(dir, bin).split(path.sep).join('/') : bin
  // `--` last: what `npm test -- <args>` appends reaches node --test, not this CLI's parser.
  return { script: `node ${shellWord(launcher)} test . --`, tiedTo: inside ? undefined : root }
}

/**
 * `reaktor new-app` and `reaktor test`: writing a reaktor app, on this machine only (no service is
 * asked).
 */
export const appCommands: CommandModule = (program, context) => {
  const { io } = context

  program.command('new-app')
    .description('create a reaktor app to start from: package.json, index.js with one polling reaktor and one aktor, a test, and with --ui a web UI')
    .addArgument(new Argument('<name>', 'the package name (my-app, @acme/widgets); the reaktor ids are <name>-poll and <name>-hello'))
    .option('--dir <folder>', 'the apps folder to create it in (default: REAKTOR_APPS_DIR, else ./reaktor-apps)')
    .option('--ui', 'add public/ with a page that calls the aktor')
    .addHelpText('after', '\nThe app goes in <folder>/<name> (a scoped name @acme/widgets: <folder>/acme-widgets). Refused\n' +
      'with exit 1, nothing written: an existing folder that is not empty, a package name or reaktor\n' +
      'id another app of the folder has, a --dir whose parent folder does not exist. A bad name is\n' +
      'exit 2. The files appear all at once: a write that fails leaves nothing behind.\n\n' +
      'Examples:\n  $ reaktor new-app my-app --ui\n  $ reaktor new-app @acme/widgets --dir /srv/reaktor-apps\n  $ reaktor --json new-app my-app')
    .action(async (name: string, opts: { dir?: string, ui?: boolean }) => {
      checkName(name)
      const plan = planApp(name)
      const configured = nonEmpty(io.env.REAKTOR_APPS_DIR)
      // The folder the service loads apps from, and the one this app goes in.
      const servedDir = path.resolve(configured ?? 'reaktor-apps')
      const appsDir = opts.dir === undefined ? servedDir : path.resolve(opts.dir)
      const dir = path.join(appsDir, plan.base)
      const ui = opts.ui === true
      const npmTest = npmTestScript(dir)
      const files = appFiles(plan, { ui, testCommand: npmTest.script })
      const created = await ensureAppsDir(appsDir)
      try {
        await refuseClashes(appsDir, plan)
        await writeApp(dir, files)
      } catch (err) {
        if (created) await fs.rmdir(appsDir).catch(() => {})
        throw err
      }
      const testCommand = `npx reaktor test ${shellWord(shownPath(dir))}`
      const notes = [
        ...(created ? [`the apps folder ${appsDir} was created.`] : []),
        ...(servedDir !== appsDir ? [`the service loads apps from REAKTOR_APPS_DIR (${configured ?? 'unset: ./reaktor-apps'}), not from this folder: start it with REAKTOR_APPS_DIR=${shellWord(appsDir)} to load this app.`] : []),
        ...(npmTest.tiedTo === undefined ? [] : [`its npm test runs the reaktor of ${npmTest.tiedTo} by this absolute path; should that folder move, edit "scripts.test" in its package.json.`])
      ]
      if (context.json()) {
        return printJson(io, { name, version: plan.version, dir, files: Object.keys(files), pollingReaktor: plan.pollingId, aktor: plan.aktorId, uiPath: ui ? plan.uiPath : null, test: testCommand })
      }
      io.stdout.write(printable(nextSteps(context, plan, dir, Object.keys(files), ui, testCommand, notes)))
    })

  program.command('test')
    .description('run a reaktor app\'s tests (node --test in its folder), with reaktor-service/sdk and reaktor-service/testing resolving to this service')
    .addArgument(new Argument('[folder]', 'the app folder (default: the current folder)'))
    .addArgument(new Argument('[node-options...]', 'after --: options for node --test (--test-name-pattern=…, --test-only)'))
    .addHelpText('after', '\nThe test files are those node --test would find (*.test.js, *-test.js, *_test.js, test-*.js,\n' +
      'test.js, any file under test/), TypeScript ones (.ts, .mts, .cts) too, outside node_modules\n' +
      'and dot-folders. The exit code is node --test\'s: 0 when every test passed; 1 also when no\n' +
      'test file was found, or when the run was ended by a signal (interrupting reaktor test ends\n' +
      'the whole run); 3 when the folder does not exist.\n\n' +
      'Examples:\n  $ reaktor test reaktor-apps/my-app\n  $ reaktor test reaktor-apps/my-app -- --test-name-pattern=hello\n  $ cd reaktor-apps/my-app && npm test -- --test-name-pattern=hello')
    .action(async (folder: string | undefined, nodeOptions: string[]) => {
      // `reaktor test -- --test-only`: the first word after -- is an option, not the folder.
      const optionFirst = folder?.startsWith('-') === true
      const extra = optionFirst ? [folder, ...nodeOptions] : nodeOptions
      const dir = path.resolve(optionFirst ? '.' : folder ?? '.')
      const stat = await fs.stat(dir).catch(() => undefined)
      if (stat === undefined) throw new CliError(EXIT.notFound, `${dir} does not exist`)
      const isApp = stat.isDirectory() && await fs.stat(path.join(dir, 'package.json')).then((s) => s.isFile(), () => false)
      if (!isApp) throw new CliError(EXIT.usage, `${dir} is not a reaktor app folder (no package.json)`)
      const plan = await planTests(dir)
      // node --test given no file would pass with nothing run: a test that was never found must not look passed.
      if (plan.files.length === 0) throw new CliError(EXIT.error, `no test files in ${dir} (expected names such as test/app.test.js or index.test.ts)`)
      const code = await runTests(context, dir, plan, extra)
      // node --test's own code, whatever it is: a script must see its failure as it is.
      if (code !== EXIT.ok) throw new CliError(code as ExitCode, '')
    })
}
