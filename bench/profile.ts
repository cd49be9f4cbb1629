/**
 * `node --import tsx bench/profile.ts <file.cpuprofile> [top]`: the functions with the most self
 * time in a `node --cpu-prof` profile (what `npm run bench -- --profile` writes), by function and
 * by file, so the hot spots can be read without a browser.
 */
import fs from 'node:fs/promises'
import { formatTable, round } from './lib.js'

interface ProfileNode { id: number, callFrame: { functionName: string, url: string, lineNumber: number }, children?: number[] }
interface Profile { nodes: ProfileNode[], samples: number[], timeDeltas: number[] }

const file = process.argv[2]
const top = Number(process.argv[3] ?? 25)
const profile = JSON.parse(await fs.readFile(file, 'utf8')) as Profile
const byId = new Map(profile.nodes.map((n) => [n.id, n]))
const self = new Map<number, number>()
profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)))
const total = [...self.values()].reduce((a, b) => a + b, 0)

const short = (url: string): string => url.replace(/^file:\/\//, '').replace(/.*node_modules\//, '~/').replace(process.cwd() + '/', '')
const byFunction = new Map<string, number>()
const byFile = new Map<string, number>()
for (const [id, us] of self) {
  const { functionName, url, lineNumber } = byId.get(id)!.callFrame
  const where = url === '' ? '(native)' : short(url)
  const key = `${functionName || '(anonymous)'} ${where}:${lineNumber + 1}`
  byFunction.set(key, (byFunction.get(key) ?? 0) + us)
  const pkg = where.startsWith('~/') ? where.split('/').slice(0, where.startsWith('~/@') ? 3 : 2).join('/') : where
  byFile.set(pkg, (byFile.get(pkg) ?? 0) + us)
}
const rows = (m: Map<string, number>): Array<Record<string, string | number>> => [...m].sort((a, b) => b[1] - a[1]).slice(0, top)
  .map(([name, us]) => ({ 'self %': round(100 * us / total, 1), 'self ms': Math.round(us / 1000), name }))
process.stdout.write(formatTable(`Self time by function (${Math.round(total / 1000)} ms sampled)`, rows(byFunction)))
process.stdout.write('\n' + formatTable('Self time by file or package', rows(byFile)))
