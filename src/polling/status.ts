import type { Kysely } from 'kysely'
import type { RegisteredPollingReaktor } from '../apps/types.js'
import type { Database, PollingReaktorRow } from '../db/schema.js'
import { formatDuration } from '../lib/duration.js'
import { effectiveIntervalMs, readStatusRows, UnknownReaktorError } from '../scheduler/index.js'
import type { PollingStatusType } from '../schemas/polling.js'

/** What the status of one reaktor is built from besides its row. */
export interface StatusSource {
  db: Kysely<Database>
  /** The reaktors registered on this node: status and list show these. */
  reaktors: ReadonlyMap<string, RegisteredPollingReaktor>
  /** The floor of every interval, as the scheduler applies it. */
  minIntervalMs: number
}

/**
 * The status of registered reaktors as the API shows it, read from the database (right from any
 * node), in the order of `ids`. An id that is not registered here is an UnknownReaktorError (404).
 */
export async function readStatuses (source: StatusSource, ids: readonly string[]): Promise<PollingStatusType[]> {
  const registered = ids.map((id) => {
    const reaktor = source.reaktors.get(id)
    if (reaktor === undefined) throw new UnknownReaktorError(id)
    return reaktor
  })
  const rows = new Map((await readStatusRows(source.db, ids)).map((r) => [r.reaktor_id, r]))
  return ids.map((id, i) => toStatus(id, registered[i], rows.get(id), source.minIntervalMs))
}

function iso (date: Date | null | undefined): string | null {
  return date === null || date === undefined ? null : date.toISOString()
}

function toStatus (id: string, reaktor: RegisteredPollingReaktor, row: PollingReaktorRow | undefined, minIntervalMs: number): PollingStatusType {
  return {
    reaktorDefinitionId: id,
    app: reaktor.app.name,
    state: row?.state ?? 'stopped',
    interval: reaktor.registration.interval,
    effectiveInterval: formatDuration(effectiveIntervalMs(reaktor, minIntervalMs)),
    lastRun: iso(row?.last_run),
    nextRun: row?.state === 'running' ? iso(row.next_run) : null,
    updatedAt: iso(row?.updated_at),
    label: reaktor.registration.label ?? null,
    description: reaktor.registration.description ?? null,
    autoStart: reaktor.registration.autoStart === true,
    lastError: row?.last_error ?? null,
    consecutiveFailures: row?.consecutive_failures ?? 0,
    blocked: row?.blocked === true,
    owner: row?.owner ?? null,
    lastSuccessAt: iso(row?.last_success_at),
    lastFailureAt: iso(row?.last_failure_at),
    lastDurationMs: row?.last_duration_ms ?? null,
    lastOutcome: row?.last_outcome ?? null,
    runningSince: iso(row?.running_since)
  }
}
