/**
 * The pure part of partitioned ownership: the id → partition hash and the even-spreading plan.
 * The plan is run here as a whole cluster would run it (every node planning from the same view,
 * applying, planning again) until nothing moves, so balance and the absence of ping-pong are shown
 * without PostgreSQL.
 */
import t from 'tap'
import { partitionOf, planOwnership, type ClusterView } from '../../src/scheduler/ownership/partitions.js'

t.test('partitionOf: stable, in range, spread', async (t) => {
  // Fixed values: a change of the hash would move every reaktor of every cluster.
  t.same(['a', 'drain-demo', 'heartbeat', 'r0', 'ünïcödé'].map((id) => partitionOf(id, 256)), [44, 83, 23, 63, 210])
  t.equal(partitionOf('anything', 1), 0)
  const counts = new Array<number>(256).fill(0)
  for (let i = 0; i < 100_000; i++) counts[partitionOf(`reaktor-${i}`, 256)]++
  const expected = 100_000 / 256
  t.ok(Math.min(...counts) > expected * 0.8 && Math.max(...counts) < expected * 1.2, `100,000 ids spread within ±20 % per partition (${Math.min(...counts)}–${Math.max(...counts)})`)
})

interface Sim {
  holders: Map<number, number>
  weights: Map<number, number>
  partitions: number
}

/**
 * Runs the plan on every member in turn (each from the current view: gives first, then takes)
 * until a whole round changes nothing. Returns the rounds it took; fails after 50.
 */
function settle (sim: Sim, members: number[], eligible?: ClusterView['eligible']): number {
  for (let round = 1; round <= 50; round++) {
    let moved = false
    for (const me of members) {
      const plan = planOwnership({ me, members, holders: sim.holders, weights: sim.weights, partitions: sim.partitions, eligible },
        { orphans: new Set(), keep: new Set(), leaving: new Set() })
      for (const p of plan.give) { sim.holders.delete(p); moved = true }
      for (const p of plan.take) {
        if (!sim.holders.has(p)) { sim.holders.set(p, me); moved = true }
      }
    }
    if (!moved) return round
  }
  throw new Error('the plan did not settle within 50 rounds')
}

function loads (sim: Sim, members: number[]): number[] {
  return members.map((m) => [...sim.holders].filter(([, h]) => h === m).reduce((sum, [p]) => sum + (sim.weights.get(p) ?? 0), 0))
}

function counts (sim: Sim, members: number[]): number[] {
  return members.map((m) => [...sim.holders.values()].filter((h) => h === m).length)
}

t.test('one node takes every partition; joining nodes get an even share of reaktors and of partitions', async (t) => {
  // 8 reaktors in 8 partitions: the 3/3/2 of the cluster tests.
  const sim: Sim = { holders: new Map(), weights: new Map([1, 20, 33, 90, 100, 150, 200, 255].map((p) => [p, 1])), partitions: 256 }
  settle(sim, [1])
  t.equal(sim.holders.size, 256, 'a single node holds everything')
  settle(sim, [1, 2])
  t.same(loads(sim, [1, 2]), [4, 4])
  t.same(counts(sim, [1, 2]), [128, 128])
  settle(sim, [1, 2, 3])
  t.same(loads(sim, [1, 2, 3]).sort(), [2, 3, 3], '8 reaktors on 3 nodes: 3/3/2')
  t.ok(counts(sim, [1, 2, 3]).every((c) => c >= 84 && c <= 86), `partitions at most ceil(256/3) = 86 each (${counts(sim, [1, 2, 3]).join('/')})`)
  t.equal(sim.holders.size, 256, 'nothing left free')
})

t.test('a dead node\'s partitions go to the survivors at once, evenly', async (t) => {
  const weights = new Map<number, number>()
  for (let p = 0; p < 256; p++) weights.set(p, 30 + (p % 7))
  const sim: Sim = { holders: new Map(), weights, partitions: 256 }
  settle(sim, [1, 2, 3])
  const total = [...weights.values()].reduce((a, b) => a + b, 0)
  for (const [p, holder] of sim.holders) if (holder === 3) sim.holders.delete(p)
  const rounds = settle(sim, [1, 2])
  t.equal(sim.holders.size, 256, 'every partition held again')
  const [a, b] = loads(sim, [1, 2])
  t.equal(a + b, total)
  t.ok(Math.abs(a - b) <= 36, `even within one partition's weight: ${a} / ${b}`)
  t.ok(rounds <= 3, `in ${rounds} rounds`)
})

t.test('a partition heavier than any node\'s room still finds a holder; no ping-pong', async (t) => {
  const sim: Sim = { holders: new Map(), weights: new Map([[5, 10], [6, 1]]), partitions: 8 }
  settle(sim, [1, 2])
  t.ok(sim.holders.has(5) && sim.holders.has(6), 'both loaded partitions held')
  const before = new Map(sim.holders)
  t.equal(settle(sim, [1, 2]), 1, 'a settled cluster plans no move')
  t.same(sim.holders, before)
})

t.test('nodes registering different reaktors: a partition goes to a node that can run all of it', async (t) => {
  // Partition 3 has a running reaktor only node 2 registers.
  const eligible = (p: number, pid: number): boolean => p !== 3 || pid === 2
  const sim: Sim = { holders: new Map([[0, 1], [1, 1], [2, 1], [3, 1]]), weights: new Map([[0, 1], [3, 1]]), partitions: 4 }
  settle(sim, [1, 2], eligible)
  t.equal(sim.holders.get(3), 2, 'handed to the node that registers it')
  // With nobody able to run it, someone holds it all the same (it runs what it can).
  const none = (p: number): boolean => p !== 3
  const alone: Sim = { holders: new Map(), weights: new Map([[3, 1]]), partitions: 4 }
  settle(alone, [1, 2], none)
  t.ok(alone.holders.has(3), 'held even when no node registers everything in it')
})

t.test('a node that can no longer run its partitions hands them over, and the able nodes take them at once, beyond their share', async (t) => {
  const weights = new Map(Array.from({ length: 12 }, (_v, p) => [p, 1]))
  const sim: Sim = { holders: new Map(), weights, partitions: 12 }
  settle(sim, [1, 2, 3])
  t.same(loads(sim, [1, 2, 3]), [4, 4, 4])
  // Node 3 no longer registers what runs in them (it could not load an app's active version). It
  // is still a member, with nothing left: the least loaded, but not able to run any of them. Free
  // partitions are not orphans here: they must be taken without waiting for the orphan grace.
  settle(sim, [1, 2, 3], (_p, pid) => pid !== 3)
  t.same(loads(sim, [1, 2, 3]), [6, 6, 0], 'every partition held by the two able nodes, evenly')

  // 300 partitions, 100 per node; node 3 has given all of its 100 back. Nodes 1 and 2 plan from that
  // one view at once (as after the release's notification): between them, they take all of them.
  const many: Sim = { holders: new Map(), weights: new Map(Array.from({ length: 300 }, (_v, p) => [p, 1])), partitions: 300 }
  settle(many, [1, 2, 3])
  for (const [p, holder] of many.holders) if (holder === 3) many.holders.delete(p)
  const plans = [1, 2].map((me) => planOwnership({ me, members: [1, 2, 3], holders: many.holders, weights: many.weights, partitions: 300, eligible: (_p, pid) => pid !== 3 },
    { orphans: new Set(), keep: new Set(), leaving: new Set() }))
  t.same(plans.map((plan) => plan.take.length), [50, 50], 'each able node takes half of them in one pass')
  t.equal(new Set(plans.flatMap((plan) => plan.take)).size, 100, 'every free partition is taken by one of them')
})

t.test('partitions being handed over count as gone: a slow handover does not make a node give away more', async (t) => {
  const weights = new Map([0, 1, 2, 3, 4, 5, 6, 7].map((p) => [p, 1]))
  const holders = new Map([0, 1, 2, 3, 4, 5, 6, 7].map((p) => [p, 1]))
  const view = { me: 1, members: [1, 2], holders, weights, partitions: 8 }
  const first = planOwnership(view, { orphans: new Set(), keep: new Set(), leaving: new Set() })
  t.equal(first.give.length, 4, 'half of the load is handed over')
  // Next pass: those four still wait for their last runs (still locked by this node).
  const second = planOwnership(view, { orphans: new Set(), keep: new Set(), leaving: new Set(first.give) })
  t.same(second.give, [], 'nothing more is given away meanwhile')
  t.same(second.take, [], 'and nothing is taken back')
})
