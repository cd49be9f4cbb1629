import { spawn } from 'node:child_process'
import fs from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { Argument } from 'commander'
import { isPackageName } from '../../apps/loader.js'
import { DEFAULT_URL } from '../client.js'
import { CliError, EXIT, type CliContext, type CommandModule, type ExitCode } from '../context.js'
import { printable, printJson } from '../output.js'
import { planApp, type AppPlan } from '../app-plan.js'
import { appFiles } from '../scaffold.js'

// npm's own limit; the loader's rule does not bound the length.
const MAX_NAME_LENGTH = 214

/** The service's checkout or install: the `reaktor` launcher a new app's `npm test` runs is in its bin/. */
const SERVICE_ROOT = fileURLToPath(new URL('../../../', import.meta.url))

function checkName (name: string): void {
  const problem = name.length > MAX_NAME_LENGTH
    ? `is longer than ${MAX_NAME_LENGTH} characters`
    : !isPackageName(name)
        ? 'is not a valid package name: lower case letters, digits, - . _ ~, not starting with . or _, optionally @scope/ (e.g. my-app, @acme/widgets)'
        // The loader passes over a folder of this name.
        : name === 'node_modules' ? 'is the one folder name the service never loads apps from' : undefined
  if (problem !== undefined) throw new CliError(EXIT.usage, `app name ${JSON.stringify(name)} ${problem}`)
}

/** `dir` as the user would type it from here: relative when inside the current folder. */
function shown (dir: string): string {
  const relative = path.relative(process.cwd(), dir)
  return relative !== '' && !relative.startsWith('..') && !path.isAbsolute(relative) ? relative : dir
}

/** A folder that is missing or empty may take the app; anything in it is never overwritten. */
async function refuseNonEmpty (dir: string): Promise<void> {
  let entries: string[]
  try {
    entries = await fs.readdir(dir)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return
    throw new CliError(EXIT.error, code === 'ENOTDIR' ? `${dir} exists and is not a folder` : `cannot read ${dir}: ${(err as Error).message}`)
  }
  if (entries.length > 0) throw new CliError(EXIT.error, `${dir} already exists and is not empty; nothing was written (choose another name or --dir)`)
}

async function writeApp (dir: string, files: Record<string, string>): Promise<void> {
  await refuseNonEmpty(dir)
  for (const [file, content] of Object.entries(files)) {
    const target = path.join(dir, file)
    await fs.mkdir(path.dirname(target), { recursive: true })
    // 'wx': should anything appear there meanwhile, it is not overwritten.
    await fs.writeFile(target, content, { flag: 'wx' })
  }
}

function nextSteps (context: CliContext, plan: AppPlan, dir: string, files: string[], ui: boolean, testCommand: string): string {
  const base = (context.io.env.REAKTOR_URL ?? DEFAULT_URL).replace(/\/+$/, '')
  const steps = [
    'Restart the service to load it (or run `npm run dev`, which restarts it when app code changes).',
    ...(ui ? [`Open its UI: ${base}${plan.uiPath}`] : []),
    `Call the aktor: curl -X POST -H "X-Service-Token: $TOKEN" -H 'Content-Type: application/json' -d '{"name":"Ada"}' ${base}/api/v1/aktor/${plan.aktorId}`,
    `Start the poller: npx reaktor polling start ${plan.pollingId}`,
    `Edit ${path.join(shown(dir), 'index.js')}, then run its tests: ${testCommand}`
  ]
  return `Created the reaktor app ${plan.name} in ${shown(dir)}:\n${files.map((f) => `  ${f}\n`).join('')}\nNext steps:\n` +
    steps.map((s, i) => `  ${i + 1}. ${s}\n`).join('')
}

/** Runs `node --test` in `dir` with the SDK's specifiers resolving to this service; its exit code. */
async function runAppTests (context: CliContext, dir: string): Promise<number> {
  const { io } = context
  // From the checkout the CLI runs as TypeScript: the preload is too, and needs tsx in the child.
  const fromSource = import.meta.url.endsWith('.ts')
  const preload = import.meta.resolve('../../apps/sdk-preload.js')
  // At a terminal the readable reporter; piped, node's default for scripts.
  const reporter = io.stdout.isTTY === true ? ['--test-reporter=spec'] : []
  const args = [...(fromSource ? ['--import', import.meta.resolve('tsx')] : []), '--import', preload, '--test', ...reporter]
  const child = spawn(process.execPath, args, { cwd: dir, env: io.env, stdio: ['ignore', 'pipe', 'pipe'] })
  child.stdout.on('data', (chunk: Buffer) => io.stdout.write(chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => io.stderr.write(chunk.toString()))
  return await new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code) => resolve(code ?? EXIT.error))
  })
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
    .addHelpText('after', '\nThe app goes in <folder>/<name> (a scoped name @acme/widgets: <folder>/acme-widgets); an existing\n' +
      'folder that is not empty is refused (exit 1) and nothing is written. A bad name is exit 2.\n\n' +
      'Examples:\n  $ reaktor new-app my-app --ui\n  $ reaktor new-app @acme/widgets --dir /srv/reaktor-apps\n  $ reaktor --json new-app my-app')
    .action(async (name: string, opts: { dir?: string, ui?: boolean }) => {
      checkName(name)
      const plan = planApp(name)
      const appsDir = path.resolve(opts.dir ?? (io.env.REAKTOR_APPS_DIR?.trim() || 'reaktor-apps'))
      const dir = path.join(appsDir, plan.base)
      const ui = opts.ui === true
      // Relative inside the service's folder (reaktor-apps/), so that the checkout can move.
      const bin = path.join(SERVICE_ROOT, 'bin', 'reaktor.js')
      const launcher = dir.startsWith(SERVICE_ROOT) ? path.relative(dir, bin).split(path.sep).join('/') : bin
      const files = appFiles(plan, { ui, testCommand: `node ${launcher} test .` })
      await writeApp(dir, files)
      const testCommand = `npx reaktor test ${shown(dir)}`
      if (context.json()) {
        return printJson(io, { name, version: plan.version, dir, files: Object.keys(files), pollingReaktor: plan.pollingId, aktor: plan.aktorId, uiPath: ui ? plan.uiPath : null, test: testCommand })
      }
      io.stdout.write(printable(nextSteps(context, plan, dir, Object.keys(files), ui, testCommand)))
    })

  program.command('test')
    .description('run a reaktor app\'s tests (node --test in its folder), with reaktor-service/sdk and reaktor-service/testing resolving to this service')
    .addArgument(new Argument('[folder]', 'the app folder (default: the current folder)'))
    .addHelpText('after', '\nThe exit code is node --test\'s: 0 when every test passed.\n\n' +
      'Examples:\n  $ reaktor test reaktor-apps/my-app\n  $ cd reaktor-apps/my-app && npm test')
    .action(async (folder: string | undefined) => {
      const dir = path.resolve(folder ?? '.')
      const isApp = await fs.stat(path.join(dir, 'package.json')).then((s) => s.isFile(), () => false)
      if (!isApp) throw new CliError(EXIT.usage, `${dir} is not a reaktor app folder (no package.json)`)
      const code = await runAppTests(context, dir)
      // node --test's own code, whatever it is: a script must see its failure as it is.
      if (code !== EXIT.ok) throw new CliError(code as ExitCode, '')
    })
}
