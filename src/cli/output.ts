import type { CliIo } from './context.js'

export interface Column<T> {
  header: string
  value: (row: T) => string | number | boolean | null | undefined
}

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g

function cell (value: string | number | boolean | null | undefined): string {
  if (value === null || value === undefined || value === '') return '-'
  // One row per line: a newline or tab in a value (an error message) would break the columns.
  // Other control characters are shown, not sent: an error message or label that carries terminal
  // escape sequences (from whatever an aktor read) must not clear, retitle or rewrite the operator's terminal.
  return String(value).replace(/[\t\r\n]+/g, ' ').replace(CONTROL, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`)
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

export function printJson (io: CliIo, value: unknown): void {
  io.stdout.write(JSON.stringify(value, null, 2) + '\n')
}
