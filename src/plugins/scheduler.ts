import fp from 'fastify-plugin'

export interface SchedulerPluginOptions {
  /** Test knobs: clock, minimum interval, etc. */
  overrides?: Record<string, unknown>
}

// STUB: wires src/scheduler into the app (start after ready, stop on close).
export default fp<SchedulerPluginOptions>(async () => {}, { name: 'scheduler', dependencies: ['config', 'db', 'apps'] })
