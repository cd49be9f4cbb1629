import { execFile } from 'node:child_process'
import fs from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

/** Files the syntax check looks at, at most: an app folder is small; a larger one ends the search. */
const MAX_CHECKED_FILES = 200

/** `file:line:column` and the offending line with a caret under it, as Node prints a SyntaxError. */
interface SyntaxLocation { file: string, line: number, column: number, source: string, caret: string }

function display (file: string, dirs: readonly string[]): string {
  for (const dir of dirs) {
    const relative = path.relative(dir, file)
    if (!relative.startsWith('..') && !path.isAbsolute(relative)) return relative
  }
  return file
}

/**
 * Reads the header Node puts above a SyntaxError when it knows the place:
 * `<file or file URL>:<line>\n<source line>\n<spaces>^^^\n\nSyntaxError: …`.
 */
export function syntaxHeader (text: string): SyntaxLocation | undefined {
  const match = /^(.+?):(\d+)\r?\n(.*)\r?\n( *)(\^+) *\r?\n\r?\n/.exec(text)
  if (match === null) return undefined
  const [, where, line, source, indent, carets] = match
  const file = where.startsWith('file:') ? fileURLToPath(where) : where
  return { file, line: Number(line), column: indent.length + 1, source, caret: indent + carets }
}

/** The .js/.mjs/.cjs files of an app folder, entry first; node_modules and dot-folders are not the app's own. */
async function ownScripts (dir: string, entry: string): Promise<string[]> {
  const files: string[] = [entry]
  const walk = async (folder: string): Promise<void> => {
    const entries = await fs.readdir(folder, { withFileTypes: true }).catch(() => [])
    for (const item of entries.sort((a, b) => a.name.localeCompare(b.name))) {
      if (files.length >= MAX_CHECKED_FILES) return
      const full = path.join(folder, item.name)
      if (item.isDirectory()) {
        if (!item.name.startsWith('.') && item.name !== 'node_modules') await walk(full)
      } else if (/\.[cm]?js$/.test(item.name) && full !== entry) {
        files.push(full)
      }
    }
  }
  await walk(dir)
  return files
}

/** The syntax error Node reports for one file, parsed without running it (`node --check`). */
async function checkSyntax (file: string): Promise<{ location: SyntaxLocation | undefined, message: string } | undefined> {
  return await new Promise((resolve) => {
    execFile(process.execPath, ['--check', file], { timeout: 10_000 }, (err, _stdout, stderr) => {
      if (err === null) return resolve(undefined)
      const message = /^SyntaxError: (.*)$/m.exec(stderr)?.[1] ?? ''
      resolve({ location: syntaxHeader(stderr), message })
    })
  })
}

/**
 * Where a SyntaxError thrown by `import()` is. Node keeps the place out of `err.stack` for ES
 * modules (it prints it only for a fatal error), so the header is read when some Node version
 * puts it there, and otherwise the app's own files are checked one by one, entry first, for the
 * file that fails with the very same message.
 */
async function locateSyntaxError (err: Error, dir: string, entry: string): Promise<SyntaxLocation | undefined> {
  const header = syntaxHeader(err.stack ?? '')
  if (header !== undefined) return header
  for (const file of await ownScripts(dir, entry)) {
    const result = await checkSyntax(file)
    if (result !== undefined && result.message === err.message) return result.location
  }
  return undefined
}

/** The first stack frame in one of `dirs`: where an app's own code threw. */
export function firstAppFrame (stack: string, dirs: readonly string[]): string | undefined {
  for (const line of stack.split('\n')) {
    const match = /((?:file:\/\/)?\/[^\s()]*):(\d+):(\d+)\)?\s*$/.exec(line.trim())
    if (match === null) continue
    const file = match[1].startsWith('file:') ? fileURLToPath(match[1]) : match[1]
    const shown = display(file, dirs)
    if (shown !== file) return `${shown}:${match[2]}:${match[3]}`
  }
  return undefined
}

/**
 * Why an app's entry module failed to import, worded for its author: a syntax error with its
 * file, line and the offending line; TypeScript this process cannot load with what to do; any
 * other error with the place in the app where it was thrown. `dirs` are the app folder and its
 * real path (an app folder may be a symlink; module URLs are real paths).
 */
export async function describeImportError (err: unknown, dirs: readonly string[], entry: string): Promise<string> {
  if (!(err instanceof Error)) return String(err)
  const code = (err as NodeJS.ErrnoException).code
  if (code === 'ERR_UNKNOWN_FILE_EXTENSION') {
    const file = / for (.+\.[cm]?ts)$/.exec(err.message)?.[1]
    if (file !== undefined) {
      return `${display(file, dirs)} is TypeScript, which this process cannot load. \`npm run dev\` runs the service under tsx, which loads it; ` +
        'for production, compile the app to JavaScript and point "main" in package.json at the compiled file'
    }
  }
  if (err.name === 'SyntaxError' && !err.message.startsWith('The requested module')) {
    const where = await locateSyntaxError(err, dirs[0], entry)
    if (where !== undefined) {
      return `SyntaxError at ${display(where.file, dirs)}:${where.line}:${where.column}: ${err.message}\n    ${where.source}\n    ${where.caret}`
    }
    return err.message
  }
  const frame = firstAppFrame(err.stack ?? '', dirs)
  return frame === undefined ? err.message : `${err.message} (thrown at ${frame})`
}
