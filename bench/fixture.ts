/**
 * What the service under test serves: an app UI (a 27 KB script and an HTML page) and the
 * registrations of the HTTP scenarios (50 polling reaktors, an echo aktor).
 */
import fs from 'node:fs/promises'
import path from 'node:path'
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
