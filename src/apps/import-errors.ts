import { execFile } from 'node:child_process'
import fs from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { atOrBelow } from '../lib/path-below.js'

/** Files the syntax check looks at, at most: an app folder is small; a larger one ends the search. */
const MAX_CHECKED_FILES = 200
/** The time all syntax checks of one error may take together: the message must not wait long for a hint. */
const CHECK_BUDGET_MS = 3000

/**
 * `file:line:column` and the offending line with a caret under it, as Node prints a SyntaxError.
 * Without a column and caret when Node gives none (`Unexpected end of input`).
 */
interface SyntaxLocation { file: string, line: number, column?: number, source: string, caret: string }

/** `file` relative to the first of `dirs` it lies in, else as it is. */
export function display (file: string, dirs: readonly string[]): string {
  const dir = dirs.find((folder) => atOrBelow(file, folder))
  return dir === undefined ? file : path.relative(dir, file)
}

/**
 * Reads the header Node puts above a SyntaxError when it knows the place:
 * `<file or file URL>:<line>\n<source line>\n<spaces>^^^\n\nSyntaxError: …`.
 */
function syntaxHeader (text: string): SyntaxLocation | undefined {
  const match = /^(.+?):(\d+)\r?\n(.*)\r?\n( *)(\^*) *\r?\n\r?\n/.exec(text)
  if (match === null) return undefined
  const [, where, line, source, indent, carets] = match
  const file = where.startsWith('file:') ? fileURLToPath(where) : where
  if (carets === '') return { file, line: Number(line), source, caret: '' }
  return { file, line: Number(line), column: indent.length + 1, source, caret: indent + carets }
}

/** A syntax error as Node shows it: the place, the reason, then the line with a caret under the place. */
function located (where: SyntaxLocation, message: string, dirs: readonly string[]): string {
  const place = `${display(where.file, dirs)}:${where.line}${where.column === undefined ? '' : `:${where.column}`}`
  const source = where.source.trim() === '' ? '' : `\n    ${where.source}${where.caret === '' ? '' : `\n    ${where.caret}`}`
  return `SyntaxError at ${place}: ${message}${source}`
}

/** esbuild's message when tsx cannot transform a TypeScript file: the place (column from 0) and the reason. */
const TRANSFORM_ERROR = /^Transform failed with \d+ errors?:\r?\n(.+):(\d+):(\d+): ERROR: (.*)$/m

/** A TypeScript file tsx could not transform, shown as Node shows a syntax error in JavaScript. */
async function transformError (message: string): Promise<{ where: SyntaxLocation, reason: string } | undefined> {
  const match = TRANSFORM_ERROR.exec(message)
  if (match === null) return undefined
  const [, file, line, column, reason] = match
  const source = (await fs.readFile(file, 'utf8').catch(() => '')).split(/\r?\n/)[Number(line) - 1] ?? ''
  return { where: { file, line: Number(line), column: Number(column) + 1, source, caret: `${' '.repeat(Number(column))}^` }, reason }
}

/**
 * The scripts to check, most likely first: the files loaded during the import (most recent first),
 * then the entry, then the folder's other .js/.mjs/.cjs files. node_modules and dot-folders are not
 * the app's own; public/ holds browser scripts, never imported.
 */
async function candidateScripts (dir: string, entry: string, loaded: readonly string[]): Promise<string[]> {
  const files = new Set<string>([...loaded.filter((file) => /\.[cm]?js$/.test(file)), entry])
  const walk = async (folder: string): Promise<void> => {
    const entries = await fs.readdir(folder, { withFileTypes: true }).catch(() => [])
    for (const item of entries.sort((a, b) => a.name.localeCompare(b.name))) {
      if (files.size >= MAX_CHECKED_FILES) return
      const full = path.join(folder, item.name)
      if (item.isDirectory()) {
        const skipped = item.name.startsWith('.') || item.name === 'node_modules' || (folder === dir && item.name === 'public')
        if (!skipped) await walk(full)
      } else if (/\.[cm]?js$/.test(item.name)) {
        files.add(full)
      }
    }
  }
  await walk(dir)
  return [...files]
}

/**
 * Whether `node --check` may take a .js file with ES module syntax for CommonJS and pass it (Node
 * 20 does, for a package without "type": "module"; Node 24 detects the syntax, and has no
 * --experimental-default-type any more).
 */
const CHECK_MAY_MISS_MODULES = process.allowedNodeEnvironmentFlags.has('--experimental-default-type')

type CheckResult = { location: SyntaxLocation | undefined, message: string } | undefined

/**
 * The syntax error Node reports for one file, parsed without running it (`node --check`). The
 * child gets no NODE_OPTIONS: the service's preloads have no business in a parse. A .js file that
 * passes where Node may have parsed it as CommonJS is parsed again as an ES module, which is how
 * it was imported: given on stdin with --input-type=module, which (unlike a default type) leaves
 * any preload's own modules as they are.
 */
async function checkSyntax (file: string, deadline: number): Promise<CheckResult> {
  const env = { ...process.env }
  delete env.NODE_OPTIONS
  const run = async (args: string[], input?: string): Promise<CheckResult> => {
    const timeout = deadline - Date.now()
    if (timeout <= 0) return undefined
    return await new Promise((resolve) => {
      const child = execFile(process.execPath, args, { timeout, env }, (err, _stdout, stderr) => {
        if (err === null) return resolve(undefined)
        const message = /^SyntaxError: (.*)$/m.exec(stderr)?.[1] ?? ''
        const location = syntaxHeader(stderr)
        resolve({ location: location === undefined ? undefined : { ...location, file }, message })
      })
      child.stdin?.on('error', () => {})
      child.stdin?.end(input)
    })
  }
  const result = await run(['--check', '--', file])
  if (result !== undefined || !CHECK_MAY_MISS_MODULES || !file.endsWith('.js')) return result
  const source = await fs.readFile(file, 'utf8').catch(() => undefined)
  return source === undefined ? undefined : await run(['--input-type=module', '--check'], source)
}

/**
 * Where a SyntaxError thrown by `import()` is when its stack has no header. Node keeps the place
 * out of `err.stack` for ES modules (it prints it only for a fatal error), so the likely files are
 * checked one by one, within a time budget, for the file that fails with the very same message.
 */
async function locateSyntaxError (message: string, dir: string, entry: string, loaded: readonly string[]): Promise<SyntaxLocation | undefined> {
  const deadline = Date.now() + CHECK_BUDGET_MS
  for (const file of await candidateScripts(dir, entry, loaded)) {
    if (Date.now() >= deadline) return undefined
    const result = await checkSyntax(file, deadline)
    if (result !== undefined && result.message === message) return result.location
  }
  return undefined
}

/**
 * A frame's place: after `at ` or inside the parentheses after a function name, up to the last
 * `:line:column`. A path may hold spaces and parentheses of its own, so the path runs greedily.
 */
const FRAME = /(?:^at |\()((?:file:\/\/)?\/.*):(\d+):(\d+)\)?$/

/** The first stack frame in one of `dirs`: where an app's own code threw. */
function firstAppFrame (stack: string, dirs: readonly string[]): string | undefined {
  for (const line of stack.split('\n')) {
    const match = FRAME.exec(line.trim())
    if (match === null) continue
    const file = match[1].startsWith('file:') ? fileURLToPath(match[1]) : match[1]
    const shown = display(file, dirs)
    if (shown !== file) return `${shown}:${match[2]}:${match[3]}`
  }
  return undefined
}

/** A property of a thrown value, or undefined when reading it throws (a getter, a Proxy): the message must still be made. */
function read (value: object, key: string): unknown {
  try {
    return (value as Record<string, unknown>)[key]
  } catch {
    return undefined
  }
}

/** What a thrown value says about itself, even when its message or conversion throws. */
export function plainMessage (err: unknown): string {
  if (typeof err === 'object' && err !== null) {
    const message = read(err, 'message')
    if (typeof message === 'string') return message
  }
  try {
    return String(err)
  } catch {
    return 'a value that cannot be shown'
  }
}

/**
 * Why an app's entry module failed to import, worded for its author: a syntax error with its
 * file, line and the offending line; TypeScript this process cannot load with what to do; any
 * other error (a SyntaxError thrown at run time, like `JSON.parse` of bad text, too) with the
 * place in the app where it was thrown. `dirs` are the app folder and its real path (an app
 * folder may be a symlink; module URLs are real paths); `loaded` the files loaded during the
 * import, the most recent first.
 */
export async function describeImportError (err: unknown, dirs: readonly string[], entry: string, loaded: readonly string[] = []): Promise<string> {
  if (!(err instanceof Error)) return plainMessage(err)
  const message = plainMessage(err)
  const given = read(err, 'stack')
  const stack = typeof given === 'string' ? given : ''
  const frame = firstAppFrame(stack, dirs)
  const code = read(err, 'code')
  if (code === 'ERR_UNKNOWN_FILE_EXTENSION') {
    const file = / for (.+\.[cm]?ts)$/.exec(message)?.[1]
    if (file !== undefined) {
      return `${display(file, dirs)} is TypeScript, which this process cannot load. \`npm run dev\` runs the service under tsx, which loads it; ` +
        'for production, compile the app to JavaScript and point "main" in package.json at the compiled file'
    }
  }
  const transformed = await transformError(message)
  if (transformed !== undefined) return located(transformed.where, transformed.reason, dirs)
  const parseError = read(err, 'name') === 'SyntaxError' && !message.startsWith('The requested module')
  // A frame in the app's code means the SyntaxError was thrown by running code, not by a parse,
  // unless Node put the parse's place above the stack (a required CommonJS file, or some Node
  // version for any module): that header is then the place.
  const header = syntaxHeader(stack)
  if (parseError && (frame === undefined || header !== undefined)) {
    const where = header ?? await locateSyntaxError(message, dirs[0], entry, loaded)
    return where === undefined ? message : located(where, message, dirs)
  }
  return frame === undefined ? message : `${message} (thrown at ${frame})`
}
