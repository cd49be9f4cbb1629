import type { AktorLogger } from '../sdk/types.js'

/**
 * The logger the scheduler needs: pino (and so Fastify's logger) fits it. Context object first,
 * message second. It is also what each run receives as `context.log` (a child with reaktorId, runId).
 */
export interface SchedulerLogger extends AktorLogger {
  child: (bindings: Record<string, unknown>) => SchedulerLogger
}
