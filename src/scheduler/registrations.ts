import { recordAudit } from '../audit/record.js'
import type { PartitionOwnership } from './partition-ownership.js'
import { partitionOf } from './ownership/partitions.js'
import type { PartitionRunners, SchedulerContext } from './partition-runners.js'
import * as store from './reaktor-store.js'

/** Ids whose registration an app version switch added, replaced or dropped. */
export interface RegistrationChange {
  added: readonly string[]
  changed: readonly string[]
  removed: readonly string[]
}

/** Changes that came before the scheduler ran, by scheduler. */
const waiting = new WeakMap<SchedulerContext, RegistrationChange[]>()

/** Once the scheduler runs: the changes that came before (none usually). */
export async function applyWaitingChanges (ctx: SchedulerContext, runners: PartitionRunners, ownership: PartitionOwnership): Promise<void> {
  const pending = waiting.get(ctx) ?? []
  waiting.delete(ctx)
  for (const diff of pending) await applyRegistrationChange(ctx, runners, ownership, diff)
}

/**
 * Scheduler.registrationsChanged: the map of registrations changed under the scheduler.
 * - `added` ids get their rows as at a first start in a live cluster (`autoStart: true` starts one
 *   that has none; the restart rules of a cold start are for boot only);
 * - `changed` ids keep their state and their owner, whose runner takes the new registration from
 *   its next run (a run in flight finishes on the code it started with);
 * - `removed` ids are stopped (their history stays) and their runners here start no run (one in flight finishes). Every node that
 *   switches writes the stop; the one that changed the rows records the audit row.
 * Then this node advertises what it now registers, and ownership looks again. Before the
 * scheduler runs nothing is written: the boot rules of start() cover every id registered by then.
 */
export async function applyRegistrationChange (ctx: SchedulerContext, runners: PartitionRunners, ownership: PartitionOwnership, diff: RegistrationChange): Promise<void> {
  // Retired while their partition is still known: the runner is found through it.
  for (const id of diff.removed) {
    runners.retireRunner(id)
    ctx.partitionOfId.delete(id)
  }
  if (ctx.partitions > 0) for (const id of diff.added) ctx.partitionOfId.set(id, partitionOf(id, ctx.partitions))
  if (!ctx.running()) {
    // Before or during start: applied once it runs (the boot rules may have read the map before it changed).
    let pending = waiting.get(ctx)
    if (pending === undefined) waiting.set(ctx, pending = [])
    pending.push(diff)
    return
  }
  const { settings } = ctx
  const at = new Date(settings.now())
  const regs = [...diff.added, ...diff.changed].flatMap((id) => {
    const r = settings.reaktors.get(id)
    const partition = ctx.partitionOfId.get(id)
    return r === undefined || partition === undefined ? [] : [{ reaktorId: id, interval: r.registration.interval, autoStart: r.registration.autoStart === true, partition }]
  })
  const applied = await store.applyBootRules(settings.db, regs, at, false)
  await store.announce(settings.db, applied.startedIds)
  runners.switchRegistrations(diff.changed)
  const stopped = await store.stopUnregistered(settings.db, diff.removed, at)
  if (stopped.length > 0) {
    await recordAudit(ctx.log, settings.auditWriter, {
      action: 'polling.unregistered', targets: stopped, actor: null, address: null, node: settings.nodeId, details: { reason: 'the active version of their app no longer registers them' }
    })
  }
  await ownership.registrationsChanged()
  ownership.noteStateChange()
  ctx.requestReconcile()
}
