import type { CliIo } from './context.js'

export interface Column<T> {
  header: string
  value: (row: T) => string | number | boolean | null | undefined
}

// C0 and C1 controls and DEL, and the bidirectional overrides and isolates. What the service answers
// (a run's error message, a label) is written by reaktor code and may hold them: printed raw, an
// escape sequence would drive the operator's terminal (rewrite its title, hide or repaint lines,
// answer back as typed input) and a bidi override would show an id other than the real one.
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g

// UNSAFE less the C0 controls, which JSON.stringify escapes itself (and the line breaks of its layout).
const UNSAFE_IN_JSON = /[\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g

/** `text` fit for a terminal: every unsafe character shown as its escape (`\x1b`, `\u202e`); line breaks kept. */
export function printable (text: string): string {
  return text.replace(UNSAFE, (ch) => ch === '\n' ? ch : escapeChar(ch))
}

/**
 * `word` as one word of a POSIX shell, for a hint meant to be pasted (a next-page command): as it
 * is when plain, else quoted; with unsafe characters in `$'…'`, escaped, so the pasted command gets
 * the very same word and the terminal shows nothing raw. Any text a service sends (a cursor) may be
 * hostile: unquoted, `x; rm -rf ~` would run when pasted.
 */
export function shellWord (word: string): string {
  if (/^[\w@%+=:,./-]+$/.test(word)) return word
  if (printable(word) === word && !word.includes('\n')) return `'${word.replaceAll("'", "'\\''")}'`
  return `$'${word.replace(/[\\']/g, '\\$&').replace(UNSAFE, escapeChar)}'`
}

function escapeChar (ch: string): string {
  const code = ch.charCodeAt(0)
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`
}

function cell (value: string | number | boolean | null | undefined): string {
  if (value === null || value === undefined || value === '') return '-'
  // One row per line: a newline or tab in a value (an error message) would break the columns.
  return printable(String(value).replace(/[\t\r\n]+/g, ' '))
}

/** A plain-text table: a header line, then one padded line per row; "(none)" when empty. */
export function formatTable<T> (rows: readonly T[], columns: ReadonlyArray<Column<T>>): string {
  if (rows.length === 0) return '(none)\n'
  const cells = rows.map((row) => columns.map((c) => cell(c.value(row))))
  const widths = columns.map((c, i) => Math.max(c.header.length, ...cells.map((r) => r[i].length)))
  const line = (values: string[]): string => values.map((v, i) => i === values.length - 1 ? v : v.padEnd(widths[i])).join('  ').trimEnd()
  return [line(columns.map((c) => c.header)), ...cells.map(line)].join('\n') + '\n'
}

/** `name: value` lines, names aligned. */
export function formatFields (fields: ReadonlyArray<[string, string | number | boolean | null | undefined]>): string {
  const width = Math.max(...fields.map(([name]) => name.length))
  return fields.map(([name, value]) => `${(name + ':').padEnd(width + 1)} ${cell(value)}`).join('\n') + '\n'
}

/**
 * JSON as the API sent it. JSON.stringify escapes C0 controls but writes DEL, C1 controls and bidi
 * overrides raw, which a terminal may act on: they are written as `\u` escapes, the same strings
 * to any JSON reader (outside strings JSON text has none of them).
 */
export function printJson (io: CliIo, value: unknown): void {
  io.stdout.write(JSON.stringify(value, null, 2).replace(UNSAFE_IN_JSON, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`) + '\n')
}
