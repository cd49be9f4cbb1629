/**
 * The benchmark figures of the docs come from kept runs only: every generated region of README.md
 * and docs/*.md equals what `npm run bench:report` writes from the newest full run's JSON, the
 * README shows the summary, every JSON in bench/results/ is cited by a page, and every JSON a page
 * cites is there.
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { asContent, regions, rewrite, wrapMarkdown } from '../../bench/report/regions.js'
import { render, REGIONS } from '../../bench/report/render.js'
import { chosenRun, loadRuns, pages, RESULTS } from '../../bench/report/runs.js'

const ROOT = path.resolve(import.meta.dirname, '../..')
const runs = loadRuns(ROOT)
const run = chosenRun(runs)
const text = (page: string): string => fs.readFileSync(path.join(ROOT, page), 'utf8')

t.test('every generated region is what the report writes from the newest full run', async (t) => {
  let checked = 0
  for (const page of pages(ROOT)) {
    for (const region of regions(text(page))) {
      t.ok(region.name in REGIONS, `${page}: ${region.name} is a region the report knows`)
      t.equal(region.content, asContent(render(region.name, { page, run, runs })), `${page}: ${region.name} is up to date (npm run bench:report)`)
      checked++
    }
  }
  t.ok(checked > 0, 'there are regions to check')
})

t.test('the README shows the summary, once', async (t) => {
  t.equal(regions(text('README.md')).filter((r) => r.name === 'summary').length, 1)
})

t.test('every kept JSON is cited by a page, and every JSON cited is kept', async (t) => {
  const cited = new Set(pages(ROOT).flatMap((page) => [...text(page).matchAll(/bench\/results\/[\w.-]+\.json/g)].map((m) => m[0])))
  // latest.json is the scratch copy every run writes, outside git: the pages name it as such.
  cited.delete(`${RESULTS}/latest.json`)
  const kept = runs.map((r) => r.file)
  t.ok(kept.length > 0)
  for (const file of kept) t.ok(cited.has(file), `${file} is cited by README.md or docs/*.md`)
  for (const file of cited) t.ok(fs.existsSync(path.join(ROOT, file)), `${file}, cited, is in ${RESULTS}/`)
})

t.test('the report reads regions strictly and rewrites only their content', async (t) => {
  const page = ['# Page', '', '<!-- bench-report:begin x -->', 'old', '<!-- bench-report:end x -->', 'after', ''].join('\n')
  t.same(regions(page), [{ name: 'x', content: 'old' }])
  const written = rewrite(page, (name) => `new ${name}`)
  t.equal(written, ['# Page', '', '<!-- bench-report:begin x -->', '', 'new x', '', '<!-- bench-report:end x -->', 'after', ''].join('\n'))
  t.same(regions(written), [{ name: 'x', content: asContent('new x') }], 'what it writes reads back as written')
  t.equal(rewrite(written, (name) => `new ${name}`), written, 'writing twice changes nothing')
  t.throws(() => regions('<!-- bench-report:begin x -->\ntext\n'), /does not end/)
  t.throws(() => regions('<!-- bench-report:begin x -->\n<!-- bench-report:end y -->\n'), /does not end/)
  t.throws(() => regions('text\n<!-- bench-report:end x -->\n'), /without its begin/)
  t.throws(() => render('nonesuch', { page: 'README.md', run, runs }), /no region called nonesuch/)
})

t.test('wrapping keeps tables, code and commands whole', async (t) => {
  const long = `${'word '.repeat(30)}\`npm run bench -- --only=4 --history=N\` ${'more '.repeat(10)}`.trim()
  const wrapped = wrapMarkdown(long, 100).split('\n')
  t.ok(wrapped.length > 1)
  t.ok(wrapped.every((l) => l.length <= 100 || !l.includes(' ')), 'lines within the width')
  t.ok(wrapped.some((l) => l.includes('`npm run bench -- --only=4 --history=N`')), 'the command on one line')
  const table = `| ${'cell | '.repeat(40)}`
  t.equal(wrapMarkdown(table, 100), table)
  t.equal(wrapMarkdown(`- ${long}`, 100).split('\n')[1].slice(0, 2), '  ', 'a list item continues indented')
})
