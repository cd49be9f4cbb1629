import type { Command } from 'commander'
import type { ApiClient } from './client.js'

// Where the API client finds them too, without importing this file back (no import cycle).
export { CliError, EXIT, type ExitCode } from './exit.js'

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
