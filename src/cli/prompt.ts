import { readAll } from '../lib/read-all.js'
import { CliError, EXIT, type CliIo } from './context.js'

/**
 * `--password-stdin` reads a pipe or a file. At a terminal it would wait for Ctrl+D while the
 * password is typed with echo, in plain sight.
 */
export function refuseTerminalStdin (io: CliIo): void {
  if (io.stdin.isTTY === true) throw new CliError(EXIT.usage, '--password-stdin reads a pipe or a file, and stdin is a terminal: leave the option out to be asked without echo')
}

/** A secret from stdin (`--password-stdin`): all of it, without the one line break `echo` adds. */
export async function secretFromStdin (io: CliIo): Promise<string> {
  refuseTerminalStdin(io)
  return (await readAll(io.stdin as AsyncIterable<Buffer | string>)).replace(/\r?\n$/, '')
}

/** A line typed at the terminal, echoed (a username); `instead` says how to give it without a terminal. */
export async function promptLine (io: CliIo, question: string, instead: string): Promise<string> {
  return await promptTty(io, question, true, instead)
}

/**
 * A secret typed at the terminal, not echoed. Passwords never come from an argument (they would
 * stay in the shell history and in the process list): a prompt, or stdin with `--password-stdin`.
 */
export async function promptSecret (io: CliIo, question: string): Promise<string> {
  return await promptTty(io, question, false, 'pipe it in with --password-stdin')
}

async function promptTty (io: CliIo, question: string, echo: boolean, instead: string): Promise<string> {
  const { stdin } = io
  if (stdin.isTTY !== true || typeof stdin.setRawMode !== 'function') {
    throw new CliError(EXIT.usage, `${question.replace(/:\s*$/, '')}: no terminal to ask on; ${instead}`)
  }
  io.stderr.write(question)
  stdin.setRawMode(true)
  stdin.resume()
  try {
    return await new Promise<string>((resolve, reject) => {
      let typed = ''
      const onData = (data: Buffer | string): void => {
        const chars = [...String(data)]
        for (const [i, ch] of chars.entries()) {
          if (ch === '\r' || ch === '\n' || ch === '\u0004') {
            stdin.removeListener('data', onData)
            // Typed ahead (or pasted) past this answer: it belongs to the next question, not to nobody.
            // Paused first: a flowing stream would emit it again at once, to no listener.
            const rest = chars.slice(ch === '\r' && chars[i + 1] === '\n' ? i + 2 : i + 1).join('')
            stdin.pause()
            if (rest !== '') stdin.unshift(Buffer.from(rest))
            io.stderr.write('\n')
            resolve(typed)
            return
          }
          if (ch === '\u0003') {
            stdin.removeListener('data', onData)
            io.stderr.write('\n')
            reject(new CliError(EXIT.error, 'cancelled'))
            return
          }
          if (ch === '\u007f' || ch === '\b') {
            if (typed.length > 0) {
              typed = [...typed].slice(0, -1).join('')
              if (echo) io.stderr.write('\b \b')
            }
            continue
          }
          typed += ch
          if (echo) io.stderr.write(ch)
        }
      }
      stdin.on('data', onData)
    })
  } finally {
    stdin.setRawMode(false)
    stdin.pause()
  }
}

/**
 * A yes/no question at the terminal, for what cannot be undone; `flag` names the option that answers
 * it without a terminal. Without a terminal it is a usage error, never a silent yes.
 */
export async function confirm (io: CliIo, question: string, flag: string): Promise<boolean> {
  if (io.stdin.isTTY !== true) throw new CliError(EXIT.usage, `${question.replace(/\?\s*$/, '')}: no terminal to ask on; add ${flag} to confirm`)
  return /^y(es)?$/i.test((await promptLine(io, `${question} [y/N] `, `add ${flag} to confirm`)).trim())
}
