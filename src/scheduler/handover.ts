import type { HeldPartition, PartitionRunners, SchedulerContext } from './partition-runners.js'
import * as partitionStore from './ownership/partition-store.js'

/** A handover retries its final flush this many times, a second apart, before it releases anyway. */
const FLUSH_ATTEMPTS = 30

/**
 * Gives partitions back between runs. Handover (balance, room in the lock table): a partition's
 * runners finish their in-flight runs without an abort; `halt` (an earlier-version node appeared):
 * they are aborted. Once every last run of a partition has settled, its results are flushed, its
 * owner cleared, its lock released and announced, so that the next holder (an under-share node,
 * notified at once) continues each reaktor from its stored next run.
 *
 * Partitions whose runs settle in the same turn are released together: one flush, one owner
 * update, one unlock and one notification for all of them (a node joining a cluster takes half of
 * the partitions of the others at once; released one by one, that was four statements and a
 * notification to every node per partition).
 */
export class Handovers {
  /** Partitions deleted from `held` whose unlock is on its way (not strays). */
  readonly releasing = new Set<number>()
  /** Settled partitions waiting for the next batch. */
  private readonly ready = new Map<number, HeldPartition>()
  private readonly flushAttempts = new Map<number, number>()
  private worker: Promise<void> | undefined

  constructor (private readonly ctx: SchedulerContext, private readonly runners: PartitionRunners) {}

  handOver (partition: number, halt = false): void {
    const hp = this.runners.held.get(partition)
    if (hp === undefined || hp.leaving) return
    hp.leaving = true
    for (const [id, runner] of hp.runners) this.runners.drain(id, partition, runner, halt ? runner.halt('handed over') : runner.finish())
    hp.runners.clear()
    void this.settled(hp).then(() => this.enqueue(hp))
  }

  /** The lock connection is gone, and every lock with it: nothing is left to release. */
  onFence (): void {
    this.releasing.clear()
    this.ready.clear()
    this.flushAttempts.clear()
  }

  /** Until every last run of the partition has settled (a stop may have let go of one before). */
  private async settled (hp: HeldPartition): Promise<void> {
    while (hp.settling.size > 0) await Promise.all([...hp.settling])
  }

  /** Still held by this node on this connection, and the scheduler still running. */
  private current (hp: HeldPartition): boolean {
    return this.runners.held.get(hp.partition) === hp && hp.epoch === this.ctx.epoch && this.ctx.running()
  }

  private enqueue (hp: HeldPartition): void {
    if (!this.current(hp)) return
    this.ready.set(hp.partition, hp)
    // After this turn: the partitions settling in it join the same batch.
    this.worker ??= new Promise<void>((resolve) => setImmediate(resolve))
      .then(async () => {
        while (this.ready.size > 0) {
          const batch = [...this.ready.values()].filter((p) => this.current(p))
          this.ready.clear()
          if (batch.length > 0) await this.release(batch)
        }
      })
      .catch((err) => this.ctx.log.warn({ err }, 'could not hand over partitions'))
      .finally(() => {
        this.worker = undefined
        // Partitions that became ready while the last statement was out.
        const next = [...this.ready.values()]
        this.ready.clear()
        for (const p of next) this.enqueue(p)
      })
  }

  private async release (batch: HeldPartition[]): Promise<void> {
    try {
      await this.ctx.batcher.flush()
    } catch (err) {
      // The next holder continues from the stored next runs: release once they are written, or
      // after FLUSH_ATTEMPTS seconds anyway (then at worst one early run each).
      const retry: HeldPartition[] = []
      const anyway: HeldPartition[] = []
      for (const hp of batch) {
        const attempts = (this.flushAttempts.get(hp.partition) ?? 0) + 1
        this.flushAttempts.set(hp.partition, attempts)
        ;(attempts < FLUSH_ATTEMPTS ? retry : anyway).push(hp)
      }
      if (retry.length > 0) {
        this.ctx.log.warn({ err, partitions: retry.length }, 'handover: could not persist the last run results; retrying')
        setTimeout(() => { for (const hp of retry) this.enqueue(hp) }, 1000).unref()
      }
      if (anyway.length === 0) return
      this.ctx.log.warn({ err, partitions: anyway.length, attempts: FLUSH_ATTEMPTS }, 'handover: the last run results could not be persisted; releasing the partitions anyway')
      batch = anyway
    }
    for (const hp of batch) this.flushAttempts.delete(hp.partition)
    const { db, nodeId } = this.ctx.settings
    await partitionStore.releasePartitions(db, nodeId, batch.map((hp) => hp.partition))
      .catch((err) => this.ctx.log.warn({ err, partitions: batch.length }, 'handover: could not clear the owner'))
    const partitions = batch.filter((hp) => this.current(hp)).map((hp) => hp.partition)
    if (partitions.length === 0) return
    for (const p of partitions) {
      this.runners.held.delete(p)
      this.releasing.add(p)
    }
    try {
      const notHeld = await this.ctx.lock.unlock(partitions)
      if (notHeld.length > 0) this.ctx.log.error({ partitions: notHeld }, 'advisory lock was not held at release (bookkeeping bug)')
    } finally {
      for (const p of partitions) this.releasing.delete(p)
    }
    await partitionStore.announcePartitions(db, partitions)
    this.ctx.log.debug({ nodeId, partitions: partitions.length }, 'partitions handed over between runs')
  }
}
