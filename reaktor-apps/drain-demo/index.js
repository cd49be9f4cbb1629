// @ts-check
/*
 * The drain pattern: each run of the polling reaktor processes ONE item of a work queue and
 * returns true while items remain, so the scheduler runs it again at once until the queue is
 * empty; then it returns false and the next run comes one interval (10s) later.
 *
 * The queue lives in memory (per process, empty after a restart): enough to watch the pattern.
 * Fill it through the aktor endpoint: POST /api/v1/aktor/drain-demo-enqueue {"count": 20}.
 */
import { setTimeout as delay } from 'node:timers/promises'
import { branch, constant, definePollingReaktor, defineReaktor, pipe, setting } from 'reaktor-service/sdk'

/** @typedef {{ id: number, enqueuedAt: string }} Item */

/** @type {Item[]} */
const queue = []
let lastId = 0
let processed = 0
/** @type {(Item & { processedAt: string }) | null} */
let lastProcessed = null

/** @type {import('reaktor-service/sdk').Aktor<unknown, boolean>} */
const hasWork = () => queue.length > 0

/**
 * Processes the first item (simulated work of `workMs`, cut short when the run is stopped) and
 * reports whether more work remains.
 * @type {import('reaktor-service/sdk').Aktor<unknown, boolean>}
 */
const processOne = async (workMs, context) => {
  // Aborted (stop, timeout): the item stays queued, because it is only taken after the work.
  await delay(Number(workMs), undefined, { signal: context.signal })
  const item = queue.shift()
  if (item === undefined) return false
  processed += 1
  lastProcessed = { ...item, processedAt: new Date().toISOString() }
  context.log.info({ item: item.id, remaining: queue.length }, 'drain-demo: processed an item')
  return queue.length > 0
}

export const pollingReaktors = [
  definePollingReaktor({
    reaktorDefinitionId: 'drain-demo',
    interval: '10s',
    autoStart: false,
    label: 'Drain demo',
    description: 'Processes one queued item per run: true while items remain (next run at once), false when the queue is empty (next run after 10s).',
    createReaktor: () => branch(hasWork, pipe(setting('workMs'), processOne), constant(false))
  })
]

function queueState () {
  return { queueLength: queue.length, processed, lastProcessed, next: queue.slice(0, 5) }
}

export const reaktors = [
  defineReaktor({
    reaktorDefinitionId: 'drain-demo-enqueue',
    label: 'Drain demo: enqueue',
    description: 'Adds `count` items to the drain demo queue; returns the queue length.',
    inputSchema: {
      type: 'object',
      properties: { count: { type: 'integer', minimum: 1, maximum: 1000 } },
      required: ['count'],
      additionalProperties: false
    },
    createReaktor: ({ settings }) => {
      const maxQueueLength = Number(settings.maxQueueLength)
      /** @type {import('reaktor-service/sdk').Aktor<{ count: number }, { added: number, queueLength: number }>} */
      const enqueue = ({ count }, context) => {
        if (queue.length + count > maxQueueLength) {
          // A 4xx statusCode on the error: the aktor endpoint answers it with this message.
          throw Object.assign(new Error(`the queue holds at most ${maxQueueLength} items (${queue.length} queued)`), { statusCode: 409 })
        }
        const enqueuedAt = new Date().toISOString()
        for (let i = 0; i < count; i++) queue.push({ id: ++lastId, enqueuedAt })
        context.log.info({ added: count, queueLength: queue.length }, 'drain-demo: items enqueued')
        return { added: count, queueLength: queue.length }
      }
      return enqueue
    }
  }),
  defineReaktor({
    reaktorDefinitionId: 'drain-demo-queue',
    label: 'Drain demo: queue state',
    description: 'Returns the queue length, the number of items processed, the last one processed and the next five.',
    createReaktor: () => queueState
  })
]
