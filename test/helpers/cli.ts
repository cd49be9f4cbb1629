import { spawn } from 'node:child_process'
import os from 'node:os'
import path from 'node:path'
import { PassThrough, Readable } from 'node:stream'
import type { CliIo } from '../../src/cli/context.js'
import { main } from '../../src/cli/main.js'
import { tempDir } from './temp-dir.js'
import type { TestContext } from './test-context.js'
import { ROOT } from './paths.js'
import { deadline } from './timing.js'

export interface CliResult { code: number | null, stdout: string, stderr: string }

/** A folder of its own as the CLI's config home (XDG_CONFIG_HOME), removed after the test. */
export async function cliHome (t: TestContext): Promise<string> {
  return await tempDir(t, 'reaktor-cli-')
}

/**
 * Runs `reaktor <args>` as a subprocess (bin/reaktor.js, as `npx reaktor` does), with only the
 * given environment on top of PATH/HOME (no REAKTOR_* from the caller's), `stdin` written then
 * closed, in `cwd` (default: the checkout). Killed after `timeoutMs`.
 */
export async function runCli (args: readonly string[], opts: { env?: Record<string, string>, stdin?: string, timeoutMs?: number, cwd?: string } = {}): Promise<CliResult> {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'reaktor.js'), ...args], {
    cwd: opts.cwd ?? ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? os.homedir(), NO_COLOR: '1', ...opts.env },
    stdio: ['pipe', 'pipe', 'pipe']
  })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (s: string) => { stdout += s })
  child.stderr.setEncoding('utf8').on('data', (s: string) => { stderr += s })
  child.stdin.end(opts.stdin ?? '')
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? deadline(30_000))
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  clearTimeout(timer)
  return { code, stdout, stderr }
}

/**
 * The same as `runCli` in this process: `main`, what bin/reaktor.js runs, without the process start
 * (a second or more each on a busy machine). For the many short checks; a test keeps a few of its
 * commands as processes, for the exit code and streams of the real command.
 */
export async function runCliInProcess (args: readonly string[], opts: { env?: Record<string, string>, stdin?: string } = {}): Promise<CliResult> {
  let stdout = ''
  let stderr = ''
  const code = await main(args, {
    env: { ...opts.env },
    stdin: Readable.from(opts.stdin === undefined ? [] : [opts.stdin]),
    stdout: { write: (text: string) => { stdout += text } },
    stderr: { write: (text: string) => { stderr += text } }
  })
  return { code, stdout, stderr }
}

/**
 * A stand-in terminal for the CLI's prompts (in process, with `env`): each time the command starts
 * reading, the next of `lines` is typed.
 */
export function terminal (env: Record<string, string>, ...lines: string[]): { io: CliIo, stdout: () => string, stderr: () => string } {
  const stdin = Object.assign(new PassThrough(), { isTTY: true, setRawMode: () => stdin })
  let out = ''
  let err = ''
  stdin.on('resume', () => {
    const line = lines.shift()
    if (line !== undefined) stdin.write(`${line}\r`)
  })
  return {
    io: { env, stdin, stdout: { write: (text: string) => { out += text } }, stderr: { write: (text: string) => { err += text } } },
    stdout: () => out,
    stderr: () => err
  }
}

