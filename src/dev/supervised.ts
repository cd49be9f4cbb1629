/*
 * The service's side of `npm run dev` (src/dev.ts). The supervisor starts each service process
 * ahead of need, with the flag below and an IPC channel: the process imports the service's modules
 * (most of a start under tsx), says so, and waits for the word to start, so that a restart costs
 * only the start itself. It tells the supervisor when it listens (whatever LOG_LEVEL hides), reloads
 * an app folder in place when told to (src/dev/app-reload.ts), and never outlives the supervisor,
 * even one killed with SIGKILL (it would hold the port). A service started any other way, even by a
 * process manager with an IPC channel of its own, has no flag, and none of this applies.
 */

/** The command-line flag the supervisor starts the service with. */
export const SUPERVISED_FLAG = '--dev-supervised'

/** How the reload in place of an app folder went. */
export type ReloadOutcome =
  /** The app (`name@version`) runs the code now on disk. */
  | { outcome: 'reloaded', app: string }
  /** The code on disk did not load (the service logged why): the app runs the version it ran. */
  | { outcome: 'failed', app: string }
  /** The change needs a restart: `reason` says why. */
  | { outcome: 'restart', reason: string }

export type SupervisorMessage =
  | { type: 'reaktor:waiting' }
  /** The environment as it is now: DATABASE_URL may be known only after the process was started ahead. */
  | { type: 'reaktor:start', env: Record<string, string | undefined> }
  | { type: 'reaktor:listening', url: string }
  /** The app folder (as the service loaded it) changed: reload it in place. */
  | { type: 'reaktor:reload-app', id: number, folder: string }
  | ({ type: 'reaktor:app-reloaded', id: number } & ReloadOutcome)

export function isMessage<T extends SupervisorMessage['type']> (message: unknown, type: T): message is Extract<SupervisorMessage, { type: T }> {
  return typeof message === 'object' && message !== null && (message as { type?: unknown }).type === type
}

/** A reload request whose fields are what they must be. */
function isReloadRequest (message: unknown): message is Extract<SupervisorMessage, { type: 'reaktor:reload-app' }> {
  if (!isMessage(message, 'reaktor:reload-app')) return false
  return Number.isSafeInteger(message.id) && typeof message.folder === 'string' && message.folder !== ''
}

function supervised (): boolean {
  return process.send !== undefined && process.argv.includes(SUPERVISED_FLAG)
}

function send (message: SupervisorMessage): void {
  if (process.connected) process.send!(message)
}

/**
 * Under the supervisor: resolves once it says to start; the service stops (SIGTERM to its process
 * group) when the supervisor goes away. Otherwise at once.
 */
export async function supervisorSaysStart (): Promise<void> {
  if (!supervised()) return
  process.once('disconnect', () => {
    // Its process group (the supervisor made it one), so that what an app started goes too.
    try {
      process.kill(-process.pid, 'SIGTERM')
    } catch {
      process.kill(process.pid, 'SIGTERM')
    }
  })
  await new Promise<void>((resolve) => {
    const onMessage = (message: unknown): void => {
      if (!isMessage(message, 'reaktor:start')) return
      process.off('message', onMessage)
      for (const [name, value] of Object.entries(message.env)) if (value !== undefined) process.env[name] = value
      resolve()
    }
    process.on('message', onMessage)
    send({ type: 'reaktor:waiting' })
  })
  // From now on the channel must not keep a service that has closed from exiting.
  process.channel?.unref()
}

export function tellSupervisorListening (url: string): void {
  if (supervised()) send({ type: 'reaktor:listening', url })
}

/**
 * Under the supervisor: reloads the app folders it names with `reload`, one at a time, and answers
 * each with the outcome (an unexpected error asks for a restart, which puts everything right).
 */
export function answerReloads (reload: (folder: string) => Promise<ReloadOutcome>): void {
  if (!supervised()) return
  let queue = Promise.resolve()
  process.on('message', (message: unknown) => {
    if (!isReloadRequest(message)) return
    queue = queue.then(async () => {
      const outcome = await reload(message.folder).catch((err: unknown): ReloadOutcome =>
        ({ outcome: 'restart', reason: `its reload in place failed: ${err instanceof Error ? err.message : String(err)}` }))
      send({ type: 'reaktor:app-reloaded', id: message.id, ...outcome })
    })
  })
}
