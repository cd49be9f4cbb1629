/**
 * What the service under test serves: an app UI (a 27 KB script and an HTML page) and the
 * registrations of the HTTP scenarios (50 polling reaktors, an echo aktor); and the packages
 * scenario 12 publishes.
 */
import { randomBytes } from 'node:crypto'
import fs from 'node:fs/promises'
import path from 'node:path'
import * as tar from 'tar'
import type { AppDefinition } from '../src/apps/types.js'
import type { PollingReaktorRegistration } from '../src/sdk/types.js'

export const BENCH_APP = { name: 'bench-ui', version: '1.0.0' }
export const JS_BYTES = 27 * 1024
export const ADMIN = { username: 'bench', password: 'bench-password-not-secret' }

/** A script of exactly JS_BYTES bytes that looks like an app bundle (compressible, not repetitive). */
function script (): string {
  const lines: string[] = ['"use strict";']
  for (let i = 0; lines.join('\n').length < JS_BYTES; i++) {
    lines.push(`function render${i}(state){const el=document.getElementById("row-${i}");if(!el)return;el.textContent=String(state.items[${i % 97}]??"")+" #${(i * 2654435761 % 2 ** 32).toString(36)}";}`)
  }
  return lines.join('\n').slice(0, JS_BYTES)
}

const HTML = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Bench UI</title>
  <script src="app.js" defer></script>
</head>
<body>
  <main>
    <h1>Bench UI</h1>
    <p>An app page: the service injects the token helper into it.</p>
    <div id="row-0"></div>
  </main>
</body>
</html>
`

/** Writes the app folder (with public/) under `dir`; returns its public/ folder. */
export async function writeBenchApp (dir: string): Promise<string> {
  const publicDir = path.join(dir, 'public')
  await fs.mkdir(publicDir, { recursive: true })
  await fs.writeFile(path.join(publicDir, 'app.js'), script())
  await fs.writeFile(path.join(publicDir, 'index.html'), HTML)
  return publicDir
}

/** How long a run of the `ledger` behaviour of bench/node.ts takes: long enough for overlapping runs to show. */
export const LEDGER_RUN_MS = 20

export function reaktorId (i: number): string {
  return `bench-${String(i).padStart(5, '0')}`
}

/** The app of the HTTP scenarios: 50 polling reaktors (each ran once), the UI and an echo aktor. */
export function httpApp (publicDir: string): AppDefinition {
  const pollingReaktors: PollingReaktorRegistration[] = Array.from({ length: 50 }, (_, i) => ({
    reaktorDefinitionId: reaktorId(i),
    interval: '1h',
    autoStart: true,
    label: `Bench reaktor ${i}`,
    description: 'A no-op polling reaktor of the benchmark',
    createReaktor: () => () => false
  }))
  return {
    ...BENCH_APP,
    publicDir,
    pollingReaktors,
    reaktors: [{ reaktorDefinitionId: 'echo', label: 'Echo', createReaktor: () => (input: unknown) => input }]
  }
}

/** The body of scenario 8. */
export const ECHO_BODY = JSON.stringify({ id: 42, name: 'reaktor', tags: ['a', 'b', 'c'], nested: { ok: true, value: 3.14 } })

/** The key (Symbol.for) of the global through which a published app's reaktor runs in bench/node.ts. */
export const RUN_HOOK = 'reaktor-bench.run'

/** The aktor of a published bench app: it answers the version whose code runs. */
export const VERSION_AKTOR = 'bench-version'

export interface PublishedBenchApp {
  name: string
  version: string
  /** Polling reaktors at 3 s (ids reaktorId(i)), each run handed to RUN_HOOK; 0: the version aktor instead. */
  reaktors: number
  /** Random (incompressible) bytes in public/pad.bin, so that the package has the size meant. */
  padBytes: number
}

/** The entry module: the version in its code, so that a switch is seen in what it answers. */
function entryModule (app: PublishedBenchApp): string {
  const version = JSON.stringify(app.version)
  if (app.reaktors === 0) {
    return `export const reaktors = [{ reaktorDefinitionId: '${VERSION_AKTOR}', createReaktor: () => () => ({ version: ${version} }) }]\n`
  }
  return [
    `const run = globalThis[Symbol.for('${RUN_HOOK}')]`,
    `export const pollingReaktors = Array.from({ length: ${app.reaktors} }, (_, i) => ({`,
    `  reaktorDefinitionId: 'bench-' + String(i).padStart(5, '0'),`,
    "  interval: '3s',",
    '  autoStart: true,',
    `  createReaktor: () => async () => run === undefined ? false : await run(i, ${version})`,
    '}))',
    ''
  ].join('\n')
}

/**
 * The package of `app` as `npm pack` lays it out (a gzip tar, every file under `package/`, no
 * folder entries), written with npm's own archive library: the bytes to publish.
 */
export async function packBenchApp (dir: string, app: PublishedBenchApp): Promise<Buffer> {
  const folder = path.join(dir, `${app.name}-${app.version}`)
  await fs.mkdir(path.join(folder, 'public'), { recursive: true })
  const files: Record<string, string | Buffer> = {
    'package.json': JSON.stringify({ name: app.name, version: app.version, type: 'module', main: 'index.js' }),
    'index.js': entryModule(app),
    'public/index.html': `<!doctype html><title>${app.name} ${app.version}</title><p>version ${app.version}</p>\n`,
    ...(app.padBytes > 0 ? { 'public/pad.bin': randomBytes(app.padBytes) } : {})
  }
  for (const [name, content] of Object.entries(files)) await fs.writeFile(path.join(folder, name), content)
  const file = `${folder}.tgz`
  await tar.create({ gzip: true, portable: true, cwd: folder, prefix: 'package/', file }, Object.keys(files))
  const bytes = await fs.readFile(file)
  await fs.rm(folder, { recursive: true, force: true })
  await fs.rm(file, { force: true })
  return bytes
}
