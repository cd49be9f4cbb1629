/**
 * The logger the scheduler needs: pino (and so Fastify's logger) fits it. Context object first,
 * message second. It is also what each run receives as `context.log` (a child with reaktorId, runId).
 */
export interface SchedulerLogger {
  trace: (obj: unknown, msg?: string) => void
  debug: (obj: unknown, msg?: string) => void
  info: (obj: unknown, msg?: string) => void
  warn: (obj: unknown, msg?: string) => void
  error: (obj: unknown, msg?: string) => void
  fatal: (obj: unknown, msg?: string) => void
  child: (bindings: Record<string, unknown>) => SchedulerLogger
}
