/**
 * `reaktor test`: finds an app's test files and runs them with `node --test`, the SDK's specifiers
 * resolving to this service.
 */
import { spawn } from 'node:child_process'
import { signalGroup } from '../lib/processes.js'
import { ownFiles } from './app-files.js'
import type { CliContext } from './context.js'

const SCRIPT_EXTENSIONS = ['js', 'mjs', 'cjs']
const TYPESCRIPT_EXTENSIONS = ['ts', 'mts', 'cts']

/**
 * node --test's own default patterns (`**\/*.test.js`, `*-test`, `*_test`, `test-*`, `test.js`,
 * anything under a `test/` folder), for the given extensions: node 20 looks for JavaScript only,
 * so a TypeScript test would never run unless named.
 */
function isTestFile (relative: string, extensions: readonly string[]): boolean {
  const parts = relative.split(/[\\/]/)
  const name = parts[parts.length - 1]
  const dot = name.lastIndexOf('.')
  if (dot <= 0 || !extensions.includes(name.slice(dot + 1))) return false
  const stem = name.slice(0, dot)
  return parts.slice(0, -1).includes('test') || stem === 'test' || stem.startsWith('test-') || /[.\-_]test$/.test(stem)
}

/** tsx, when this service has it: TypeScript tests run through it (from the checkout it is there). */
function tsxLoader (): string | undefined {
  try {
    return import.meta.resolve('tsx')
  } catch {
    return undefined
  }
}

export interface TestPlan {
  files: string[]
  /** The `--import`s of the run: tsx when there, then the SDK's resolve hook. */
  imports: string[]
}

/** The run of `dir`'s tests: its test files (relative, sorted), not in node_modules or a dot-folder, as node --test passes them over. */
export async function planTests (dir: string): Promise<TestPlan> {
  const tsx = tsxLoader()
  const extensions = tsx === undefined ? SCRIPT_EXTENSIONS : [...SCRIPT_EXTENSIONS, ...TYPESCRIPT_EXTENSIONS]
  const files = (await ownFiles(dir)).filter((file) => isTestFile(file, extensions)).sort()
  return { files, imports: [...(tsx === undefined ? [] : [tsx]), import.meta.resolve('../apps/sdk-preload.js')] }
}

const FORWARDED = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const

/**
 * Runs `node --test` on `plan.files` in `dir`, `extra` (node's options, `--test-name-pattern=…`)
 * before them; resolves with its exit code. A signal to this process goes to the whole run (its own
 * process group: node --test and every test file's process), so interrupting `reaktor test` leaves
 * nothing running. A run ended by a signal is said so, and is exit 1.
 */
export async function runTests (context: CliContext, dir: string, plan: TestPlan, extra: readonly string[]): Promise<number> {
  const { io } = context
  // At a terminal the readable reporter; piped, node's default for scripts.
  const reporter = io.stdout.isTTY === true ? ['--test-reporter=spec'] : []
  const args = [...plan.imports.flatMap((i) => ['--import', i]), '--test', ...reporter, ...extra, ...plan.files]
  const child = spawn(process.execPath, args, { cwd: dir, env: io.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  // Decoded as a stream: a character split between two chunks is written whole.
  child.stdout.setEncoding('utf8').on('data', (text: string) => io.stdout.write(text))
  child.stderr.setEncoding('utf8').on('data', (text: string) => io.stderr.write(text))
  let received: NodeJS.Signals | undefined
  const forward = (signal: NodeJS.Signals): void => {
    received ??= signal
    signalGroup(child.pid, signal)
  }
  for (const signal of FORWARDED) process.on(signal, forward)
  try {
    return await new Promise((resolve, reject) => {
      child.on('error', reject)
      child.on('close', (code, signal) => {
        // node --test ends itself on SIGINT and SIGTERM, with a code that does not tell why.
        const by = signal ?? received
        if (by === undefined) { resolve(code ?? 1); return }
        io.stderr.write(`reaktor: node --test was killed by ${by}\n`)
        // Whatever the test files started is ended with it.
        signalGroup(child.pid, 'SIGKILL')
        resolve(1)
      })
    })
  } finally {
    for (const signal of FORWARDED) process.off(signal, forward)
  }
}

