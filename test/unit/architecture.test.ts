/**
 * The layout rules of docs/architecture.md, checked on the source itself: files stay
 * small enough to read, modules import each other without cycles, folders depend on each other one
 * way only (top to bottom through the layers below), and the scheduler and the polling read side
 * never reach into the HTTP layer.
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { codeSpans, section } from '../helpers/markdown.js'

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

/** The strongly connected components of more than one node (each a cycle or several): Tarjan's algorithm. */
function cyclesOf<N> (nodes: Iterable<N>, next: (node: N) => Iterable<N>): N[][] {
  const index = new Map<N, number>()
  const low = new Map<N, number>()
  const stack: N[] = []
  const cycles: N[][] = []
  const visit = (v: N): void => {
    index.set(v, index.size)
    low.set(v, index.get(v)!)
    stack.push(v)
    for (const w of next(v)) {
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (stack.includes(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!))
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: N[] = []
      let w: N
      do {
        w = stack.pop()!
        component.push(w)
      } while (w !== v)
      if (component.length > 1) cycles.push(component)
    }
  }
  for (const v of nodes) if (!index.has(v)) visit(v)
  return cycles
}

t.test('no import cycles', async (t) => {
  const graph = new Map(files.map((f) => [f, specifiers(f).map((s) => resolveLocal(f, s)).filter((d): d is string => d !== undefined)]))
  t.ok([...graph.values()].every((deps) => deps.every((d) => graph.has(d))), 'every relative import names a source file')
  t.same(cyclesOf(files, (f) => graph.get(f) ?? []).map((c) => c.map(rel)), [])
})

/**
 * The folder layers, top to bottom. A module imports from its own node and from the layers below
 * its own: never from above, nor from another node of its own layer. Every import counts (type-only
 * ones, re-exports, `import()`); `import.meta.resolve` names a file without loading it (the apps'
 * SDK resolution hands them the service's public modules) and is none.
 *
 * A node is a loose file of src/, or a top-level folder with its subfolders (cli/commands/ is part
 * of cli/, db/migrations/ of db/, and so on), except for the subfolders listed here on their own:
 * scheduler/ownership/ is a node apart from scheduler/, which may import it and not the reverse.
 */
const LAYERS: ReadonlyArray<{ nodes: readonly string[], holds: string }> = [
  { nodes: ['server.ts', 'dev.ts', 'cli'], holds: 'entry points: the service process, `npm run dev`, the `reaktor` command and the commands of npm scripts' },
  { nodes: ['app.ts', 'dev'], holds: 'the service as one Fastify plugin (the package\'s main export); the parts of the dev loop' },
  { nodes: ['plugins'], holds: 'Fastify wiring: decorators, hooks and scopes (the app-UI scope registers its route)' },
  { nodes: ['routes'], holds: 'the HTTP routes' },
  { nodes: ['errors.ts', 'logging'], holds: 'the error catalogue (domain errors to HTTP answers); the log setup (redaction, request loggers, pretty output)' },
  { nodes: ['polling', 'testing'], holds: 'the read side of polling reaktors (status, lists, history); the public test harness, reaktor-service/testing' },
  { nodes: ['scheduler', 'schemas', 'metrics', 'app-ui'], holds: 'the distributed timer; the API schemas; metric helpers; serving app UIs from disk' },
  { nodes: ['scheduler/ownership', 'auth'], holds: 'partitions, advisory-lock keys and the lock connection; users, sessions, API tokens' },
  { nodes: ['audit', 'apps'], holds: 'the audit log; loading and registering reaktor apps' },
  { nodes: ['db', 'sdk'], holds: 'the database (pool, schema, migrations, embedded PostgreSQL); the SDK apps are written with' },
  { nodes: ['config.ts'], holds: 'the settings, read from the environment once' },
  { nodes: ['lib'], holds: 'helpers that know nothing of the service' }
]
const ENTRY_FILES = ['app.ts', 'config.ts', 'dev.ts', 'errors.ts', 'server.ts']
const layerOf = new Map(LAYERS.flatMap(({ nodes }, layer) => nodes.map((node) => [node, layer] as const)))
const subfolderNodes = [...layerOf.keys()].filter((node) => node.includes('/')).sort((a, b) => b.length - a.length)

/** The node of a source file (see LAYERS). */
function nodeOf (file: string): string {
  const name = rel(file).split(path.sep).join('/')
  if (!name.includes('/')) return name
  return subfolderNodes.find((node) => name.startsWith(`${node}/`)) ?? name.split('/')[0]
}

/** Every import from one node into another, as `file → specifier`. */
const folderEdges = new Map<string, Map<string, string[]>>()
for (const f of files) {
  for (const s of specifiers(f)) {
    const target = resolveLocal(f, s)
    if (target === undefined) continue
    const [from, to] = [nodeOf(f), nodeOf(target)]
    if (from === to) continue
    const edges = folderEdges.get(from) ?? folderEdges.set(from, new Map()).get(from)!
    const imports = edges.get(to) ?? edges.set(to, []).get(to)!
    imports.push(`${rel(f)} → ${s}`)
  }
}

t.test('src/ holds folders and its entry files only', async (t) => {
  const loose = fs.readdirSync(SRC, { withFileTypes: true }).filter((e) => !e.isDirectory()).map((e) => e.name).sort()
  t.same(loose, ENTRY_FILES)
  const nodes = [...new Set(files.map(nodeOf))].sort()
  t.same(nodes.filter((node) => !layerOf.has(node)), [], 'every folder and entry file is in a layer')
  t.same([...layerOf.keys()].filter((node) => !nodes.includes(node)), [], 'every node of the layers exists')
})

t.test('every import between folders goes down the layers', async (t) => {
  const offending = [...folderEdges].flatMap(([from, to]) => [...to].flatMap(([node, imports]) => {
    const [a, b] = [layerOf.get(from), layerOf.get(node)]
    if (a === undefined || b === undefined || a < b) return []
    const why = a === b ? `${from} and ${node} are in one layer (${LAYERS[a].holds})` : `${node} is above ${from}`
    return imports.map((i) => `${i}: ${why}`)
  }))
  t.same(offending, [])
  t.ok(folderEdges.size > 15, `and it sees them: ${[...folderEdges.values()].reduce((n, to) => n + to.size, 0)} folder-to-folder edges`)
})

/** The shortest cycle within a strongly connected component of the folder graph: its nodes in order. */
function shortestCycle (component: readonly string[]): string[] {
  const inside = new Set(component)
  let best: string[] = []
  for (const start of component) {
    // Breadth first from `start` until an edge leads back to it.
    const cameFrom = new Map<string, string>()
    let frontier = [start]
    let found: string | undefined
    while (frontier.length > 0 && found === undefined) {
      const next: string[] = []
      for (const node of frontier) {
        for (const to of folderEdges.get(node)?.keys() ?? []) {
          if (to === start) found ??= node
          else if (inside.has(to) && !cameFrom.has(to)) {
            cameFrom.set(to, node)
            next.push(to)
          }
        }
      }
      frontier = next
    }
    const cycle = [start]
    for (let node = found; node !== undefined && node !== start; node = cameFrom.get(node)) cycle.splice(1, 0, node)
    if (best.length === 0 || cycle.length < best.length) best = cycle
  }
  return best
}

t.test('the folder graph has no cycle', async (t) => {
  // One cycle per tangle, the shortest, with the imports that make it: breaking one of them is the
  // start (the test then names the next cycle, if any).
  const cycles = cyclesOf(folderEdges.keys(), (node) => folderEdges.get(node)?.keys() ?? []).map((component) => {
    const cycle = shortestCycle(component)
    return {
      cycle: [...cycle, cycle[0]].join(' → '),
      imports: cycle.flatMap((a, i) => folderEdges.get(a)?.get(cycle[(i + 1) % cycle.length]) ?? [])
    }
  })
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

t.test('docs/architecture.md lists these layers, in this order', async (t) => {
  const layers = section(fs.readFileSync(path.resolve(SRC, '../docs/architecture.md'), 'utf8'), 'Layers')
  // Each numbered item starts with its nodes in backticks, before the colon.
  const listed = [...layers.matchAll(/^\d+\. (.*?):/gm)].map((m) => codeSpans(m[1]))
  t.same(listed, LAYERS.map(({ nodes }) => [...nodes]))
})

t.test('sdk/ is a leaf: what apps import reaches no other part of the service', async (t) => {
  t.same([...folderEdges.get('sdk') ?? []].flatMap(([, imports]) => imports), [])
  t.ok(files.some((f) => nodeOf(f) === 'sdk'), 'and sdk/ has files')
})
