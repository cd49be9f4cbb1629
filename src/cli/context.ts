import type { Command } from 'commander'
import type { ApiClient } from './client.js'

// Defined in errors.ts, which the API client imports too (from here it would be an import cycle).
export { CliError, EXIT, type ExitCode } from './errors.js'

/** Where a command reads and writes: the process's own streams and environment, or a test's. */
export interface CliIo {
  env: Record<string, string | undefined>
  stdin: NodeJS.ReadableStream & { isTTY?: boolean, setRawMode?: (mode: boolean) => unknown }
  stdout: { write: (text: string) => unknown, isTTY?: boolean }
  stderr: { write: (text: string) => unknown, isTTY?: boolean }
}

/** What every command module gets: the streams, the global options, and the API. */
export interface CliContext {
  io: CliIo
  /** `--json` was given: print JSON on stdout (the API's answer as is, unless a command says otherwise). */
  json: () => boolean
  /**
   * The API of the service: `--url`, else REAKTOR_URL, else the stored login's URL, else
   * http://127.0.0.1:3000; the token from REAKTOR_TOKEN, else the stored login (for its URL only).
   */
  api: () => Promise<ApiClient>
}

/** One command group: adds its commands to the program. */
export type CommandModule = (program: Command, context: CliContext) => void

/** An environment variable's value, trimmed; blank is as good as unset. */
export function nonEmpty (value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim()
}
