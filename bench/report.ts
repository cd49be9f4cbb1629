/**
 * `npm run bench:report [-- bench/results/<file>.json]`: rewrites every generated region of
 * README.md and docs/*.md (bench/report/regions.ts: the markers; bench/report/render.ts: what each
 * region holds) from the newest full run kept in bench/results/, or from the JSON named.
 * test/unit/bench-report.test.ts checks that the committed pages equal what this writes.
 */
import fs from 'node:fs'
import path from 'node:path'
import { ROOT } from './lib.js'
import { regions, rewrite } from './report/regions.js'
import { render } from './report/render.js'
import { chosenRun, loadRuns, pages } from './report/runs.js'

const runs = loadRuns()
const run = chosenRun(runs, process.argv[2])
for (const page of pages()) {
  const file = path.join(ROOT, page)
  const text = fs.readFileSync(file, 'utf8')
  const names = regions(text).map((r) => r.name)
  if (names.length === 0) continue
  const written = rewrite(text, (name) => render(name, { page, run, runs }))
  if (written !== text) fs.writeFileSync(file, written)
  process.stdout.write(`${page}: ${names.join(', ')}${written === text ? ' (unchanged)' : ''}\n`)
}
process.stdout.write(`from ${run.file}\n`)
