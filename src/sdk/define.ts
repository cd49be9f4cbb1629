import type { PollingReaktorRegistration, ReaktorAppModule, ReaktorRegistration } from './types.js'

/*
 * Identity functions that exist for their types: a registration written through them is checked
 * where it is written (a polling aktor must return a boolean; no misspelt fields), instead of
 * failing at start-up or at its first run.
 */

/** A polling reaktor registration; its aktor must return `boolean` (or `Promise<boolean>`). */
export function definePollingReaktor (registration: PollingReaktorRegistration): PollingReaktorRegistration {
  return registration
}

/** A standard reaktor registration, callable through `POST /api/v1/aktor/{reaktorDefinitionId}`. */
export function defineReaktor<I = any, O = unknown> (registration: ReaktorRegistration<I, O>): ReaktorRegistration<I, O> {
  return registration
}

/** An app's exports (use as the entry module's default export). */
export function defineApp (app: ReaktorAppModule): ReaktorAppModule {
  return app
}
