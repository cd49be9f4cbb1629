/*
 * The service's side of `npm run dev` (src/dev.ts). The supervisor starts each service process
 * ahead of need, with the flag below and an IPC channel: the process imports the service's modules
 * (most of a start under tsx), says so, and waits for the word to start, so that a reload costs only
 * the start itself. It tells the supervisor when it listens (whatever LOG_LEVEL hides), and never
 * outlives it, even one killed with SIGKILL (it would hold the port). A service started any other
 * way, even by a process manager with an IPC channel of its own, has no flag, and none of this applies.
 */

/** The command-line flag the supervisor starts the service with. */
export const SUPERVISED_FLAG = '--dev-supervised'

export type SupervisorMessage =
  | { type: 'reaktor:waiting' }
  /** The environment as it is now: DATABASE_URL may be known only after the process was started ahead. */
  | { type: 'reaktor:start', env: Record<string, string | undefined> }
  | { type: 'reaktor:listening', url: string }

export function isMessage<T extends SupervisorMessage['type']> (message: unknown, type: T): message is Extract<SupervisorMessage, { type: T }> {
  return typeof message === 'object' && message !== null && (message as { type?: unknown }).type === type
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
