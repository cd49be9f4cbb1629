/**
 * The `publish` region: what scenario 12 of the newest full run says (publishing apps on 3 nodes),
 * in words around its figures; until a kept full run has it, that it is still to come.
 */
import path from 'node:path'
import { median, num } from '../lib.js'
import { TARGETS } from '../targets.js'
import { dec, int, type RenderContext } from './runs.js'


export function renderPublish (ctx: RenderContext): string {
  const r = ctx.run.json.results ?? {}
  const { s12_publish: publish, s12_memory: memory, s12_runs: runs } = r
  const apps = `[Publishing apps](${path.posix.relative(path.posix.dirname(ctx.page), 'docs/apps.md')}#publishing-apps)`
  if (publish === undefined && memory === undefined && runs === undefined) {
    return `The newest full run (commit \`${ctx.run.json.commit ?? 'unknown'}\`) predates scenario 12, publishing apps (${apps}): its figures come here with the next kept full run. What it measures and its targets are under [Targets](#targets) and [How to read the tables](#how-to-read-the-tables).`
  }
  const out: string[] = []
  if (publish !== undefined) {
    const samples = publish.samples as Array<{ bytes: number, answeredMs: number }>
    out.push(`- **Publish** of a ${int(median(samples.map((s) => s.bytes)) / 1024)} KiB package to one node of 3 in turn, ${samples.length} times: every node served the new version's UI and answered from its code ${int(num(publish.p50))} ms after the package was sent (median), ${int(num(publish.max))} ms at most (target: at most ${int(TARGETS.s12.publishMaxMs)} ms); the node asked answered once it had switched, after ${int(median(samples.map((s) => s.answeredMs)))} ms (median).`)
  }
  if (memory !== undefined) {
    const per = (memory.rssPerMiB as number[]).map((v) => dec(v, 2)).join(' / ')
    const heap = (memory.heapPerMiB as number[]).map((v) => dec(v, 2)).join(' / ')
    out.push(`- **Memory**: over ${int(num(memory.activations))} activations of versions a node had not loaded, each node's RSS grew by ${per} MiB per activation (target: at most ${TARGETS.s12.rssPerActivationMiB} MiB on the worst node) and its live heap by ${heap} MiB, ${memory.gc === true ? 'both after forced full collections' : 'without a forced collection'}. Node cannot unload a module, so this adds up until the node restarts (${apps}).`)
  }
  if (runs !== undefined) {
    const switches = runs.switches as Array<{ everyNodeMs: number }>
    out.push(`- **Reaktors through activations**: ${String(runs.label)} on 3 nodes: ${dec(num(runs.share) * 100)} % of the expected runs (target: at least ${TARGETS.s12.share * 100} %), a p99 lateness of ${dec(num(runs.gapP99))} ms (target: at most ${TARGETS.s12.p99Ms} ms), ${int(num(runs.stalled))} that did not run again and ${int(num(runs.overlaps))} overlapping runs of one reaktor among the ${int(num(runs.ledgerRuns))} recorded on every node; every node ran the activated version at most ${int(Math.max(...switches.map((s) => s.everyNodeMs)))} ms after an activation was sent.`)
  }
  return out.join('\n')
}
