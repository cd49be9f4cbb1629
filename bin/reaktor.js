#!/usr/bin/env node
// The `reaktor` command. In a checkout (src/ present, tsx installed) it runs the TypeScript source,
// so the command never lags behind the code; in a build (the Docker image) it runs dist/.
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const source = fileURLToPath(new URL('../src/cli/index.ts', import.meta.url))
let useSource = existsSync(source)
if (useSource) {
  try {
    const { register } = await import('tsx/esm/api')
    register()
  } catch {
    useSource = false
  }
}
await import(useSource ? '../src/cli/index.ts' : '../dist/cli/index.js')
