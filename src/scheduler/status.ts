import type { RegisteredPollingReaktor } from '../apps/types.js'
import type { PollingReaktorRow } from '../db/schema.js'
import { formatDuration } from '../duration.js'
import { effectiveIntervalMs, type PollingReaktorStatus, type SchedulerSettings } from './options.js'
import * as store from './store.js'

/**
 * The status of registered reaktors, read from the database (right from any node), in the order
 * of `ids`. `only`: the registration when a single id was asked for (already looked up).
 */
export async function readStatus (
  settings: Pick<SchedulerSettings, 'db' | 'reaktors' | 'minIntervalMs'>, ids: readonly string[], only?: RegisteredPollingReaktor
): Promise<PollingReaktorStatus[]> {
  const rows = new Map((await store.readRows(settings.db, ids)).map((r) => [r.reaktor_id, r]))
  return ids.map((id) => toStatus(id, only ?? settings.reaktors.get(id)!, rows.get(id), settings.minIntervalMs))
}

function toStatus (id: string, reaktor: RegisteredPollingReaktor, row: PollingReaktorRow | undefined, minIntervalMs: number): PollingReaktorStatus {
  return {
    reaktorDefinitionId: id,
    state: row?.state ?? 'stopped',
    interval: reaktor.registration.interval,
    effectiveInterval: formatDuration(effectiveIntervalMs(reaktor, minIntervalMs)),
    lastRun: row?.last_run ?? null,
    nextRun: row?.state === 'running' ? row.next_run : null,
    updatedAt: row?.updated_at ?? null,
    lastError: row?.last_error ?? null,
    consecutiveFailures: row?.consecutive_failures ?? 0,
    owner: row?.owner ?? null,
    label: reaktor.registration.label ?? null,
    description: reaktor.registration.description ?? null,
    autoStart: reaktor.registration.autoStart === true
  }
}
