/**
 * The `scale` region: what scenario 11 of the newest full run says, in words around its figures.
 */
import { num } from '../lib.js'
import { TARGETS } from '../targets.js'
import { dec, int, scaleOf, type RenderContext } from './runs.js'

export function renderScale (ctx: RenderContext): string {
  const r = ctx.run.json.results ?? {}
  const { cases, kills, refusals, missing, overlaps, slowest } = scaleOf(r)
  const memory = r.s11_memory
  const out: string[] = []
  if (cases.length > 0) {
    out.push(`- **Ownership**: ${cases.map((c) => String(c.label)).join('; ')}: all under 256 partition locks (plus two per node), ${int(refusals)} lock refusals. One lock per reaktor, before partitions, did not fit in PostgreSQL's lock table at this scale: that is why partitions exist.`)
    out.push(`- **Cost per run** (no-op aktor, every run's result and history row written in batched statements of at most 1,000 rows of each kind), CPU of all processes together (nodes, PostgreSQL, the bench) and of the nodes alone: ${cases.map((c) => `${String(c.label)}, ${int(num(c.cpuPerRunUs))} µs (nodes ${int(num(c.nodeCpuPerRunUs))})`).join('; ')}. At 30 s intervals the fixed costs of a node (its reaktors' timers and heap, the per-second reconcile) are spread over a tenth of the runs.`)
  }
  if (memory !== undefined && cases[0] !== undefined) {
    const mb = (v: unknown): number => num(v) / 2 ** 20
    out.push(`- **Memory**: a node with ${int(num(cases[0].reaktors))} reaktors measured ${int(num(cases[0].rss?.[0]))} MB of RSS, ${int(num(memory.rssPer))} MB per 10,000 when the whole process is divided by the reaktors (target: under ${TARGETS.s11.rssPer10kMB}); the same process with no reaktor takes ${int(mb(memory.base?.rss))} MB (Fastify, pg, the TypeScript loader of the bench). Its live heap after a forced full GC grows by about ${int(num(memory.heapPer))} MB per 10,000 running reaktors; RSS above an idle node by about ${int(num(memory.marginal))} MB per 10,000. RSS depends on when V8 collects, so it moves from run to run: [Every kept run](#every-kept-run) shows by how much.`)
  }
  if (kills.length > 0) {
    const early = kills.reduce((a, k) => a + (k.lateness as number[]).filter((l) => l < -50).length, 0)
    out.push(`- **kill -9 of one of 3 nodes** with about 3,000 reaktors each (runs of 20 ms every 3 s), ${kills.length === 1 ? 'once' : `${kills.length} times`}: ${missing === 0 ? 'every orphan ran again on a survivor' : `${int(missing)} orphans did not run again`}, ${int(overlaps)} overlapping runs of one reaktor (checked over every run of every node in the window), and every orphan that ran again did so at most ${dec(slowest / 1000)} s after the kill. "After due" is the first run minus the later of the kill and the due time. "Caught up early" (${int(early)} in all) counts reaktors whose last result the killed node had not flushed yet: the survivor continues from the stored (older) next run, i.e. one catch-up run, as for any crash (a negative "after due").`)
  }
  return out.join('\n')
}
