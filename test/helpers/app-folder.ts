import { execFile } from 'node:child_process'
import fs from 'node:fs/promises'
import path from 'node:path'
import { promisify } from 'node:util'
import type { Test } from 'tap'
import ts from 'typescript'
import { loadAppsFromDir } from '../../src/apps/loader.js'
import { RegistrationError } from '../../src/apps/registry.js'
import { tempDir } from './temp-dir.js'
import { memoryLogger } from './log.js'
import { ROOT } from './paths.js'
import { deadline } from './timing.js'

export const ESM = { type: 'module' }
export const POLLING = `export const pollingReaktors = [{ reaktorDefinitionId: 'poll', interval: '5s', createReaktor: () => async () => false }]`

/** Writes an app folder: package.json (an object, or raw text) plus files. */
export async function writeApp (root: string, folder: string, pkg: object | string | undefined, files: Record<string, string> = {}): Promise<string> {
  const dir = path.join(root, folder)
  await fs.mkdir(dir, { recursive: true })
  if (pkg !== undefined) await fs.writeFile(path.join(dir, 'package.json'), typeof pkg === 'string' ? pkg : JSON.stringify(pkg))
  for (const [name, content] of Object.entries(files)) {
    await fs.mkdir(path.dirname(path.join(dir, name)), { recursive: true })
    await fs.writeFile(path.join(dir, name), content)
  }
  return dir
}

/** `npm pack` of an app folder (what `reaktor apps publish` sends), written into it: the tarball's path. */
export async function npmPack (dir: string): Promise<string> {
  const { stdout } = await promisify(execFile)('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: dir })
  return path.join(dir, stdout.trim().split('\n').pop()!)
}

/** The message loading `root` stops the start with; fails the test unless it is a RegistrationError. */
export async function loadError (t: Test, root: string, env: Record<string, string> = {}): Promise<string> {
  const err = await loadAppsFromDir(root, env, memoryLogger()).then(() => undefined, (e: unknown) => e)
  t.type(err, RegistrationError, 'a RegistrationError')
  return (err as Error)?.message ?? ''
}

/**
 * The loader and what it imports, compiled to plain JavaScript in a temporary folder: a child
 * process runs it with plain `node`, as production does (no tsx, whose hooks load TypeScript and
 * decide module formats themselves).
 */
export async function compiledLoader (t: Test): Promise<string> {
  const out = await tempDir(t)
  const pending = ['apps/loader.ts']
  const done = new Set<string>()
  while (pending.length > 0) {
    const file = pending.pop() as string
    if (done.has(file)) continue
    done.add(file)
    const source = await fs.readFile(path.join(ROOT, 'src', file), 'utf8')
    for (const [, specifier] of source.matchAll(/^import (?!type ).*? from '(\.[^']+)'/gm)) {
      pending.push(path.posix.join(path.posix.dirname(file), specifier.replace(/\.js$/, '.ts')))
    }
    const { outputText } = ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } })
    await fs.mkdir(path.dirname(path.join(out, file)), { recursive: true })
    await fs.writeFile(path.join(out, file.replace(/\.ts$/, '.js')), outputText)
  }
  return path.join(out, 'apps', 'loader.js')
}

/**
 * Runs `loadAppsFromDir(root)` of the compiled loader in a child `node` (the one running the
 * tests; `prelude` is code run before the loader is imported), `runs` times, with a logger that writes one JSON line per
 * call to stdout; stderr is kept apart. A child still running after `timeoutMs` is killed and fails
 * the load: a hang shows as a failure, not as a stuck test.
 */
export async function loadInChild (loader: string, root: string, { prelude = '', runs = 1, timeoutMs = deadline(20_000) }: { prelude?: string, runs?: number, timeoutMs?: number } = {}): Promise<{ stdout: string, stderr: string, lines: Array<{ level: string, obj: Record<string, unknown>, msg: string }> }> {
  const script = `${prelude}
    const { loadAppsFromDir } = await import(${JSON.stringify(loader)})
    const line = (level) => (obj, msg) => console.log(JSON.stringify({ level, obj, msg }))
    for (let run = 0; run < ${runs}; run++) {
      try {
        await loadAppsFromDir(${JSON.stringify(root)}, {}, { info: line('info'), warn: line('warn') })
      } catch (err) {
        console.log(JSON.stringify({ level: 'error', obj: {}, msg: err.message }))
      }
    }`
  return await new Promise((resolve, reject) => {
    execFile(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err !== null) return reject(new Error(`the child failed: ${err.message}\n${stderr}`))
      resolve({ stdout, stderr, lines: stdout.trim().split('\n').filter((l) => l !== '').map((l) => JSON.parse(l)) })
    })
  })
}
