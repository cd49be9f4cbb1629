/** Whether a process of that PID runs: one of another user's too (signalling it is refused, not failed). */
export function isAlive (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/**
 * `signal` to the process group a child spawned `detached` leads: the child and every process it
 * started, as a terminal's Ctrl-C reaches a foreground job. Nothing when no process of it is left.
 */
export function signalGroup (pid: number | undefined, signal: NodeJS.Signals): void {
  try {
    if (pid !== undefined) process.kill(-pid, signal)
  } catch {
    // No process of the group is left.
  }
}
