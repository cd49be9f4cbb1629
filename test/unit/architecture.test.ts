/**
 * The layout rules of the README's Architecture section, checked on the source itself: files stay
 * small enough to read, modules import each other without cycles, and the scheduler and the
 * polling read side never reach into the HTTP layer.
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'

const SRC = path.resolve(import.meta.dirname, '../../src')
const MAX_LINES = 450

function sourceFiles (dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name)
    return entry.isDirectory() ? sourceFiles(full) : entry.name.endsWith('.ts') ? [full] : []
  })
}

interface Import { specifier: string, typeOnly: boolean, dynamic: boolean }

/**
 * Every module a file imports or re-exports: its statements (type-only ones marked), side-effect
 * imports, and `import()`. Template literals are left out: the scaffold's templates hold the
 * imports of the files they write.
 */
function importsOf (source: string): Import[] {
  const code = source.replace(/`(?:[^`\\]|\\.)*`/g, '``')
  return [
    ...[...code.matchAll(/(?:^|\n)\s*(?:import|export)\s+(type\s)?[^'"]*?from\s+['"]([^'"]+)['"]/g)].map((m) => ({ specifier: m[2], typeOnly: m[1] !== undefined, dynamic: false })),
    ...[...code.matchAll(/(?:^|\n)\s*import\s+['"]([^'"]+)['"]/g)].map((m) => ({ specifier: m[1], typeOnly: false, dynamic: false })),
    ...[...code.matchAll(/import\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => ({ specifier: m[1], typeOnly: false, dynamic: true }))
  ]
}

/** The file a relative specifier names, or undefined for packages. */
function resolveLocal (from: string, specifier: string): string | undefined {
  if (!specifier.startsWith('.')) return undefined
  const target = path.resolve(path.dirname(from), specifier).replace(/\.js$/, '.ts')
  return fs.existsSync(target) && fs.statSync(target).isDirectory() ? path.join(target, 'index.ts') : target
}

const files = sourceFiles(SRC)
const imports = new Map(files.map((f) => [f, importsOf(fs.readFileSync(f, 'utf8'))]))
const specifiers = (f: string): string[] => imports.get(f)!.map((i) => i.specifier)
const rel = (f: string): string => path.relative(SRC, f)

t.test('the rules see the whole source tree', async (t) => {
  t.ok(files.length > 50, `${files.length} source files`)
  t.ok([...imports.values()].flat().length > 200, 'and their imports')
})

t.test(`no source file is longer than ${MAX_LINES} lines`, async (t) => {
  const long = files.map((f) => ({ file: rel(f), lines: fs.readFileSync(f, 'utf8').split('\n').length }))
    .filter((f) => f.lines > MAX_LINES)
  t.same(long, [])
})

t.test('no import cycles', async (t) => {
  // Tarjan's strongly connected components over the relative imports.
  const graph = new Map(files.map((f) => [f, specifiers(f).map((s) => resolveLocal(f, s)).filter((d): d is string => d !== undefined)]))
  t.ok([...graph.values()].every((deps) => deps.every((d) => graph.has(d))), 'every relative import names a source file')
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const cycles: string[][] = []
  const visit = (v: string): void => {
    index.set(v, index.size)
    low.set(v, index.get(v)!)
    stack.push(v)
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (stack.includes(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!))
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = []
      let w: string
      do {
        w = stack.pop()!
        component.push(rel(w))
      } while (w !== v)
      if (component.length > 1) cycles.push(component)
    }
  }
  for (const f of files) if (!index.has(f)) visit(f)
  t.same(cycles, [])
})

t.test('the scheduler and the polling read side know nothing of HTTP', async (t) => {
  const http = /^(fastify|@fastify\/|fastify-plugin)/
  const layers = ['routes', 'plugins', 'schemas'].map((d) => path.join(SRC, d) + path.sep)
  for (const folder of ['scheduler', 'polling']) {
    const offending = files.filter((f) => f.startsWith(path.join(SRC, folder) + path.sep)).flatMap((f) =>
      specifiers(f).filter((s) => http.test(s) || layers.some((l) => resolveLocal(f, s)?.startsWith(l) === true && !(folder === 'polling' && l.endsWith(`schemas${path.sep}`))))
        .map((s) => `${rel(f)} imports ${s}`))
    t.same(offending, [], `src/${folder}/: no Fastify, no routes or plugins${folder === 'scheduler' ? ', no API schemas' : ''}`)
  }
})

/**
 * The source files and the packages a module loads at run time (type-only imports cost nothing);
 * with `dynamic: false`, only what it loads at its start (an `import()` loads on use).
 */
function reachedFrom (entry: string, { dynamic }: { dynamic: boolean }): { files: Set<string>, packages: Set<string> } {
  const reached = new Set<string>()
  const packages = new Set<string>()
  const visit = (file: string): void => {
    if (reached.has(file)) return
    reached.add(file)
    for (const { specifier: s } of imports.get(file)!.filter((i) => !i.typeOnly && (dynamic || !i.dynamic))) {
      const target = resolveLocal(file, s)
      if (target !== undefined) visit(target)
      else if (!s.startsWith('node:')) packages.add(s.startsWith('@') ? s.split('/').slice(0, 2).join('/') : s.split('/')[0])
    }
  }
  visit(entry)
  return { files: reached, packages }
}

t.test('reaktor-service/testing loads no more than a run needs: no configuration, no scheduler, no database', async (t) => {
  const { files } = reachedFrom(path.join(SRC, 'testing', 'index.ts'), { dynamic: true })
  const heavy = [...files].map(rel).filter((f) => ['config.ts', 'errors.ts', 'app.ts'].includes(f) || /^(db|routes|plugins)\//.test(f) || f === 'scheduler/index.ts' || f === 'scheduler/scheduler.ts')
  t.same(heavy, [], 'its imports reach none of these')
})

t.test('the reaktor command starts light: it loads no package of the server (the schema library alone is a few hundred modules)', async (t) => {
  const { files, packages } = reachedFrom(path.join(SRC, 'cli', 'index.ts'), { dynamic: false })
  t.ok(files.size > 20, `it reaches the commands (${files.size} files)`)
  t.same([...packages].sort(), ['commander'], 'its only package is its argument parser')
})
