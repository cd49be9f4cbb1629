/**
 * The documentation checked against the tree, so that it cannot go stale unnoticed: the README
 * stays a short entry page, docs/architecture.md names every folder of src/ (and only files that
 * exist), every relative link of README.md and docs/*.md reaches a file (and a heading, for a
 * `#anchor` into a page), and every `src/…` path they name exists.
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { codeSpans, prose, section, withoutFences } from '../helpers/markdown.js'

const ROOT = path.resolve(import.meta.dirname, '../..')
const SRC = path.join(ROOT, 'src')
const README_MAX_LINES = 400

const rel = (file: string): string => path.relative(ROOT, file)
/** Each page is read once, however many checks and links look at it. */
const texts = new Map<string, string>()
const read = (file: string): string => texts.get(file) ?? texts.set(file, fs.readFileSync(file, 'utf8')).get(file)!
/** The anchors of the pages links lead into, each computed once. */
const anchorsOf = new Map<string, Set<string>>()

/** README.md and every page of docs/. */
function documents (): string[] {
  const docs = path.join(ROOT, 'docs')
  return [path.join(ROOT, 'README.md'), ...fs.readdirSync(docs).filter((f) => f.endsWith('.md')).sort().map((f) => path.join(docs, f))]
}

/** GitHub's anchor of a heading: markup dropped, lower case, punctuation but `-` and `_` dropped, each space a `-`. */
function slug (heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-')
}

/** Every anchor a page has: its headings' slugs, a repeated one numbered as GitHub numbers it. */
function anchors (text: string): Set<string> {
  const seen = new Map<string, number>()
  const result = new Set<string>()
  for (const m of withoutFences(text).matchAll(/^#{1,6}\s+(.*?)\s*#*\s*$/gm)) {
    const base = slug(m[1])
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    result.add(count === 0 ? base : `${base}-${count}`)
  }
  return result
}

/** The relative links of a Markdown file (inline links and images) that lead nowhere: `target: why`. */
function brokenLinks (file: string, text: string): string[] {
  const broken: string[] = []
  for (const m of prose(text).matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
    const target = m[1]
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue
    const [pathPart, anchor] = target.split('#', 2) as [string, string | undefined]
    const resolved = pathPart === '' ? file : path.resolve(path.dirname(file), decodeURIComponent(pathPart))
    if (pathPart !== '' && !fs.existsSync(resolved)) {
      broken.push(`${target}: no such file`)
      continue
    }
    if (anchor === undefined || !resolved.endsWith('.md')) continue
    const targetAnchors = resolved === file ? anchors(text) : anchorsOf.get(resolved) ?? anchorsOf.set(resolved, anchors(read(resolved))).get(resolved)!
    if (!targetAnchors.has(anchor)) broken.push(`${target}: no heading with that anchor`)
  }
  return broken
}

/**
 * The `src/…` paths a text names in code spans that do not exist. A glob (`src/scheduler/*`)
 * counts when the folder before its first `*` exists.
 */
function missingSourcePaths (text: string): string[] {
  return codeSpans(text)
    .filter((span) => /^src\/[^\s`]*$/.test(span))
    .filter((span) => !fs.existsSync(path.join(ROOT, span.split('*')[0])))
}

/** Every folder below src/, as `scheduler/ownership`. */
function sourceFolders (dir: string = SRC): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory()).flatMap((e) => {
    const full = path.join(dir, e.name)
    return [path.relative(SRC, full).split(path.sep).join('/'), ...sourceFolders(full)]
  })
}

/** The folders of test/ and bench/ (one level: their own subfolders are the tests' data), but not the run's artifacts. */
function testAndBenchFolders (): string[] {
  return ['test', 'bench'].flatMap((top) => fs.readdirSync(path.join(ROOT, top), { withFileTypes: true })
    .filter((e) => e.isDirectory() && e.name !== 'artifacts')
    .map((e) => `${top}/${e.name}`))
}

/**
 * The modules `src/app.ts` registers, in its order: `plugins/config.ts`, `@fastify/sensible`,
 * `routes/health.ts`, … (the encapsulating functions between them are not modules, and pass).
 */
function registrationOrder (source: string): string[] {
  const modules = new Map([...source.matchAll(/^import\s+(\w+)(?:\s*,\s*\{[^}]*\})?\s+from\s+'([^']+)'/gm)].map((m) => [m[1], m[2]]))
  return [...source.matchAll(/\.register\((\w+)/g)]
    .map((m) => modules.get(m[1]))
    .filter((specifier): specifier is string => specifier !== undefined && (specifier.startsWith('./') || specifier.startsWith('@fastify/')))
    .map((specifier) => specifier.replace(/^\.\//, '').replace(/\.js$/, '.ts'))
}

/** The modules a page's section lists as registered, in the order it lists them. */
function listedOrder (text: string, heading: string): string[] {
  return codeSpans(section(text, heading)).filter((span) => /^(?:(?:plugins|routes)\/[\w-]+\.ts|@fastify\/[\w-]+)$/.test(span))
}

/** The folders of src/ that a text does not name, as `src/<folder>/` or `<folder>/` (not inside a longer path). */
function unnamedFolders (text: string, folders: string[]): string[] {
  const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  const body = withoutFences(text)
  // A row of its own, its first cell the folder: a mention in passing says nothing of what it holds.
  return folders.filter((folder) => !new RegExp(`^\\|\\s*\`(?:src/)?${escape(folder)}/\`\\s*\\|`, 'm').test(body))
}

/**
 * Files an architecture table names that do not exist: in a row whose first cell is a folder of
 * src/ (`| \`src/db/\` | … |`), each code span ending in `.ts` is a file of that folder (or, written
 * as `src/…`, of the tree).
 */
function missingTableFiles (text: string): string[] {
  const missing: string[] = []
  for (const m of withoutFences(text).matchAll(/^\|\s*`(src\/[^`]*\/)`\s*\|(.*)$/gm)) {
    for (const span of codeSpans(m[2])) {
      const file = span.startsWith('src/') ? span : `${m[1]}${span}`
      if (/^[\w./-]+\.ts$/.test(span) && !fs.existsSync(path.join(ROOT, file))) missing.push(file)
    }
  }
  return missing
}

t.test(`the README is at most ${README_MAX_LINES} lines`, async (t) => {
  const lines = read(path.join(ROOT, 'README.md')).split('\n').length - 1
  t.ok(lines <= README_MAX_LINES, `README.md has ${lines} lines`)
})

t.test('the README\'s map links every page of docs/', async (t) => {
  const readme = prose(read(path.join(ROOT, 'README.md')))
  const linked = new Set([...readme.matchAll(/\]\(docs\/([^)#]+\.md)(?:#[^)]*)?\)/g)].map((m) => m[1]))
  const pages = fs.readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md'))
  t.ok(pages.length >= 10, `${pages.length} pages in docs/`)
  t.same(pages.filter((page) => !linked.has(page)), [], 'every page linked')
})

t.test('docs/architecture.md names every folder of src/, and only files that exist', async (t) => {
  const folders = sourceFolders()
  t.ok(folders.length >= 20, `${folders.length} folders below src/`)
  const text = read(path.join(ROOT, 'docs', 'architecture.md'))
  t.same(unnamedFolders(text, folders), [], 'every folder named')
  t.same(missingTableFiles(text), [], 'every file its folder rows name exists')
  t.same(unnamedFolders(text, testAndBenchFolders()), [], 'and every folder of test/ and bench/')
})

t.test('docs/architecture.md lists the plugins in the order src/app.ts registers them', async (t) => {
  const order = registrationOrder(read(path.join(SRC, 'app.ts')))
  t.ok(order.length >= 20, `${order.length} registrations`)
  t.same(listedOrder(read(path.join(ROOT, 'docs', 'architecture.md')), 'The order plugins register in'), order)
})

t.test('every relative link of README.md and docs/*.md reaches a file, and a heading for an anchor', async (t) => {
  const files = documents()
  t.ok(files.length >= 10, `${files.length} pages`)
  for (const file of files) t.same(brokenLinks(file, read(file)), [], rel(file))
})

t.test('every src/… path named in README.md and docs/*.md exists', async (t) => {
  for (const file of documents()) t.same(missingSourcePaths(read(file)), [], rel(file))
})

t.test('the checks catch what they are for', async (t) => {
  const page = path.join(ROOT, 'docs', 'made-up.md')
  t.same(brokenLinks(page, '# Here\n[a](missing.md) [b](cluster.md#no-such-heading) [c](#here) [d](#gone) [e](../README.md) [f](https://example.com/x)\n'),
    ['missing.md: no such file', 'cluster.md#no-such-heading: no heading with that anchor', '#gone: no heading with that anchor'])
  t.same(brokenLinks(page, '`[a](missing.md)`\n```\n[b](missing.md)\n```\n'), [], 'code is not a link')
  t.same(missingSourcePaths('`src/app.ts`, `src/nowhere.ts`, `src/scheduler/*`, `src/gone/*`, `app src/x.ts`'), ['src/nowhere.ts', 'src/gone/*'])
  t.same(unnamedFolders('| `src/db/` | x |\n| `src/scheduler/ownership/` | y |\n`src/apps/` in passing, and reaktor-apps/\n', ['db', 'scheduler/ownership', 'apps', 'ownership']), ['apps', 'ownership'])
  t.same(missingTableFiles('| `src/db/` | `index.ts`, `gone.ts`; `src/app.ts`, `src/gone.ts` |\n'), ['src/db/gone.ts', 'src/gone.ts'])
  const app = "import a from './plugins/a.js'\nimport b, { type B } from '@fastify/b'\nimport fp from 'fastify-plugin'\nimport c from './routes/c.js'\n" +
    'f.register(fp(x))\nf.register(b)\nf.register(async (api) => { await api.register(c) })\nf.register(a)\n'
  t.same(registrationOrder(app), ['@fastify/b', 'routes/c.ts', 'plugins/a.ts'])
  t.same(listedOrder('## Other\n`plugins/x.ts`\n## Order\n1. `@fastify/b`\n2. `routes/c.ts` under `/x`, `plugins/a.ts`\n## Next\n`plugins/y.ts`\n', 'Order'),
    ['@fastify/b', 'routes/c.ts', 'plugins/a.ts'])
  t.equal(slug('`POST /api/v1/aktor/{aktorName}`'), 'post-apiv1aktoraktorname')
  t.equal(slug('Failures, and what they cost (measured)'), 'failures-and-what-they-cost-measured')
  t.same([...anchors('# A\n## A\n```\n# B\n```\n### Ünïcode_x: y\n')], ['a', 'a-1', 'ünïcode_x-y'])
})
