import { Writable } from 'node:stream'
import type { SchedulerLogger } from '../../src/scheduler/index.js'
import type { AktorLogger } from '../../src/sdk/types.js'

export interface LogLine { level: 'info' | 'warn' | 'error' | 'fatal', obj: unknown, msg?: string }

export type MemoryLogger = SchedulerLogger & { lines: LogLine[] }

/**
 * A logger that records info, warnings and errors (tests assert on them) and prints nothing; a
 * child records into the same lines, its bindings merged into each line's object. Debug lines (one
 * per polling run) are dropped. Fits every logger the service's parts take.
 */
export function memoryLogger (lines: LogLine[] = []): MemoryLogger {
  const make = (bindings: Record<string, unknown>): MemoryLogger => {
    const record = (level: LogLine['level']) => (obj: unknown, msg?: string): void => {
      lines.push({ level, obj: { ...bindings, ...(obj as object) }, msg })
    }
    return {
      lines,
      trace: () => {},
      debug: () => {},
      info: record('info'),
      warn: record('warn'),
      error: record('error'),
      fatal: record('fatal'),
      child: (more) => make({ ...bindings, ...more })
    }
  }
  return make({})
}

/** A logger that drops everything. */
export const silentLogger: AktorLogger = { trace: () => {}, debug: () => {}, info: () => {}, warn: () => {}, error: () => {}, fatal: () => {} }

/** A destination for a real pino logger: keeps every line written (serialized JSON text). */
export function logOutput (): { stream: Writable, lines: string[] } {
  const lines: string[] = []
  const stream = new Writable({ write (chunk, _enc, cb) { lines.push(String(chunk)); cb() } })
  return { stream, lines }
}
