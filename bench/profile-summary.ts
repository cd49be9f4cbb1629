/**
 * `node --import tsx bench/profile-summary.ts FILE.cpuprofile [N]`: the N (default 30) functions
 * with the most self time in a V8 CPU profile (what `--cpu-prof` writes), with their share of the
 * busy (non-idle) time.
 */
import { readFileSync } from 'node:fs'

interface Node { id: number, callFrame: { functionName: string, url: string, lineNumber: number }, hitCount?: number, children?: number[] }
interface Profile { nodes: Node[], samples: number[], timeDeltas: number[], startTime: number, endTime: number }

const [file, top = '30'] = process.argv.slice(2)
if (file === undefined) throw new Error('usage: profile-summary.ts FILE.cpuprofile [N]')
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile
const byId = new Map(profile.nodes.map((n) => [n.id, n]))
const self = new Map<number, number>()
for (let i = 0; i < profile.samples.length; i++) self.set(profile.samples[i], (self.get(profile.samples[i]) ?? 0) + (profile.timeDeltas[i] ?? 0))
const totals = new Map<string, number>()
let busy = 0
for (const [id, us] of self) {
  const { functionName, url, lineNumber } = byId.get(id)!.callFrame
  if (functionName === '(idle)' || functionName === '(program)') continue
  busy += us
  const key = `${functionName || '(anonymous)'} ${url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(src|bench)\//, '$1/')}:${lineNumber + 1}`
  totals.set(key, (totals.get(key) ?? 0) + us)
}
const wall = (profile.endTime - profile.startTime) / 1e6
process.stdout.write(`${file}: ${wall.toFixed(1)} s profiled, ${(busy / 1e6).toFixed(1)} s busy (${(100 * busy / 1e6 / wall).toFixed(0)} % of one core)\n`)
for (const [key, us] of [...totals].sort((a, b) => b[1] - a[1]).slice(0, Number(top))) {
  process.stdout.write(`${(100 * us / busy).toFixed(1).padStart(5)} %  ${(us / 1000).toFixed(0).padStart(7)} ms  ${key}\n`)
}
