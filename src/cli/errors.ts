/** Exit codes scripts rely on (docs/cli.md). */
export const EXIT = { ok: 0, error: 1, usage: 2, notFound: 3, auth: 4 } as const
export type ExitCode = typeof EXIT[keyof typeof EXIT]

/** A failure the command reports on stderr and turns into its exit code. */
export class CliError extends Error {
  constructor (readonly exitCode: ExitCode, message: string) {
    super(message)
    this.name = 'CliError'
  }
}
