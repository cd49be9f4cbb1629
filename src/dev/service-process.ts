import { spawn } from 'node:child_process'
import readline from 'node:readline'
import { signalGroup } from '../lib/processes.js'
import { isMessage, SUPERVISED_FLAG, type ReloadOutcome, type SupervisorMessage } from './supervised.js'

export interface ServiceExit { code: number | null, signal: NodeJS.Signals | null }

/**
 * One service process of the dev supervisor. It is spawned ahead of need (a spare): it imports the
 * service's modules, then waits for `start()`. Until then it writes nothing: a spare that cannot
 * import (a syntax error in src/) shows its error when it is started, not while the one before it serves.
 */
export interface ServiceProcess {
  pid: number | undefined
  /** Whether `stop()` or `kill()` was called: its exit was asked for, not a failure. */
  stopping: () => boolean
  /** True once its modules are imported and it waits for `start()`; false when it exits first. */
  waiting: Promise<boolean>
  /** Whether `waiting` has settled: its import is over, well or not. */
  imported: () => boolean
  /** Lets the service start, once its modules are imported, with `env` as it is then. */
  start: () => void
  /** True once the started service listens; false when it exits before it does (a start that failed). */
  ready: Promise<boolean>
  exited: Promise<ServiceExit>
  /**
   * SIGTERM to its process group, and SIGKILL to what is left of it `killAfterMs` later; resolves
   * once the service has exited.
   */
  stop: (killAfterMs: number) => Promise<ServiceExit>
  /** SIGKILL to its process group at once (a second Ctrl-C; what is left when the supervisor exits). */
  kill: () => void
  /** Whether it serves: it listens, and has neither exited nor been asked to stop. */
  serving: () => boolean
  /**
   * Asks it to reload an app folder in place, and resolves with how that went once the service's
   * log line about it is out too; undefined when it exits or has not answered within `limitMs`.
   */
  reloadApp: (folder: string, limitMs: number) => Promise<ReloadOutcome | undefined>
}

/** How long the answer to a reload waits for the service's log line about it (it may trail the answer by a moment). */
const LOG_LINE_WAIT_MS = 100

type Answer = Extract<SupervisorMessage, { type: 'reaktor:app-reloaded' }>

function outcomeOf (answer: Answer): ReloadOutcome {
  return answer.outcome === 'restart' ? { outcome: 'restart', reason: answer.reason } : { outcome: answer.outcome, app: answer.app }
}

export interface ServiceOptions {
  /** The service's entry module, run with this process's own Node options (`--import tsx` for src/). */
  entry: string
  /** Read when the process is spawned, and again when it is told to start (settings known only by then). */
  env: NodeJS.ProcessEnv
  /** Each line the service writes to stdout (its JSON log lines), for the supervisor to format. */
  onLine: (line: string) => void
}

export function spawnService ({ entry, env, onLine }: ServiceOptions): ServiceProcess {
  const child = spawn(process.execPath, [...process.execArgv, entry, SUPERVISED_FLAG], {
    env,
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    // A process group of its own: Ctrl-C reaches the supervisor only, which stops the service
    // with one SIGTERM. Had the service the signal too, the supervisor's SIGTERM would be its
    // second signal, which ends it at once instead of closing it gracefully.
    detached: true
  })
  let started = false
  const held: Buffer[] = []
  // stderr is where a start that fails says why, in one line: to the terminal as it comes.
  child.stderr!.on('data', (chunk: Buffer) => { if (started) process.stderr.write(chunk); else held.push(chunk) })
  let listeningLogged: () => void = () => {}
  const listeningLine = new Promise<void>((resolve) => { listeningLogged = resolve })
  /** Each line as it is read, for the reloads waiting for theirs. */
  const lineWatchers = new Set<(line: string) => void>()
  readline.createInterface({ input: child.stdout! }).on('line', (line) => {
    onLine(line)
    for (const watch of lineWatchers) watch(line)
    if (line.includes('"msg":"Server listening at ')) listeningLogged()
  })

  // Exited once its last lines are read too ('close'), so that a service's "stopped" or the end of
  // a crash is printed before the supervisor moves on; but not later than a moment after its exit,
  // since a process the service started may hold its stdout open.
  const exited = new Promise<ServiceExit>((resolve) => child.once('exit', (code, signal) => {
    const timer = setTimeout(() => resolve({ code, signal }), 500)
    child.once('close', () => {
      clearTimeout(timer)
      resolve({ code, signal })
    })
  }))
  const waiting = new Promise<boolean>((resolve) => {
    child.on('message', (message) => { if (isMessage(message, 'reaktor:waiting')) resolve(true) })
    void exited.then(() => resolve(false))
  })
  const ready = new Promise<boolean>((resolve) => {
    // Fastify's "Server listening" line may come a few milliseconds after this message: the
    // supervisor's "ready in" waits for it (a moment at most: LOG_LEVEL may hide it), to follow it.
    child.on('message', (message) => {
      if (!isMessage(message, 'reaktor:listening')) return
      const timer = setTimeout(() => resolve(true), 100)
      void listeningLine.then(() => {
        clearTimeout(timer)
        resolve(true)
      })
    })
    void exited.then(() => resolve(false))
  })
  let imported = false
  void waiting.then(() => { imported = true })
  // The service's whole process group: the processes an app starts go with it (each reload, and
  // Ctrl-C), as a terminal's Ctrl-C ends a foreground job. Windows has no process groups.
  const signalService = (signal: NodeJS.Signals): void => {
    if (process.platform === 'win32') child.kill(signal)
    else signalGroup(child.pid, signal)
  }
  let stopping = false
  let listening = false
  let ended = false
  void ready.then((ok) => { listening = ok })
  void exited.then(() => { ended = true })

  let reloads = 0
  const ask = async (id: number, folder: string, limitMs: number): Promise<ReloadOutcome | undefined> => await new Promise((resolve) => {
    const onMessage = (message: unknown): void => { if (isMessage(message, 'reaktor:app-reloaded') && message.id === id) done(outcomeOf(message)) }
    const done = (answer: ReloadOutcome | undefined): void => {
      clearTimeout(timer)
      child.off('message', onMessage)
      resolve(answer)
    }
    const timer = setTimeout(() => { done(undefined) }, limitMs)
    child.on('message', onMessage)
    void exited.then(() => { done(undefined) })
    child.send({ type: 'reaktor:reload-app', id, folder } satisfies SupervisorMessage, (err) => { if (err !== null) done(undefined) })
  })
  const reloadApp = async (folder: string, limitMs: number): Promise<ReloadOutcome | undefined> => {
    if (!child.connected) return undefined
    const seen: string[] = []
    let onReloadLine = (line: string): void => { seen.push(line) }
    const watcher = (line: string): void => { onReloadLine(line) }
    lineWatchers.add(watcher)
    try {
      const answer = await ask(++reloads, folder, limitMs)
      if (answer === undefined || answer.outcome === 'restart') return answer
      // The service logs before it answers, but its lines come through another pipe.
      const marker = `"msg":"app ${answer.app} `
      if (!seen.some((line) => line.includes(marker))) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, LOG_LINE_WAIT_MS)
          onReloadLine = (line) => {
            if (!line.includes(marker)) return
            clearTimeout(timer)
            resolve()
          }
        })
      }
      return answer
    } finally {
      lineWatchers.delete(watcher)
    }
  }
  return {
    pid: child.pid,
    stopping: () => stopping,
    waiting,
    imported: () => imported,
    start: () => {
      started = true
      for (const chunk of held.splice(0)) process.stderr.write(chunk)
      void waiting.then((waits) => { if (waits && child.connected) child.send({ type: 'reaktor:start', env } satisfies SupervisorMessage) })
    },
    ready,
    exited,
    stop: async (killAfterMs) => {
      stopping = true
      signalService('SIGTERM')
      // Not cleared when the service has exited: what it started has until then to end too. Not
      // waited for either (an ended process of the group may stay a zombie for a while).
      setTimeout(() => { signalService('SIGKILL') }, killAfterMs).unref()
      return await exited
    },
    kill: () => {
      stopping = true
      signalService('SIGKILL')
    },
    serving: () => listening && !ended && !stopping,
    reloadApp
  }
}
