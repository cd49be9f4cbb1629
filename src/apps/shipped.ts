import fs from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

/** The apps shipped with the service: its own `reaktor-apps/` folder, beside `src/` and `dist/`. */
export const SHIPPED_APPS_DIR = fileURLToPath(new URL('../../reaktor-apps/', import.meta.url))

/** The operator console's folder there (a UI-only app). */
export const CONSOLE_FOLDER = 'reaktor-console'
/** The example apps there, loaded with EXAMPLE_APPS=true. */
export const EXAMPLE_FOLDERS = ['drain-demo', 'heartbeat']

async function real (p: string): Promise<string> {
  return await fs.realpath(p).catch(() => path.resolve(p))
}

/**
 * The shipped app folders to load besides REAKTOR_APPS_DIR: the console (unless CONSOLE=false),
 * whatever REAKTOR_APPS_DIR holds, and the examples with EXAMPLE_APPS=true. None when
 * REAKTOR_APPS_DIR is the shipped folder itself (they are loaded from it already, as in a checkout's
 * `npm start`).
 */
export async function shippedFolders (opts: { appsDir: string, console: boolean, examples: boolean }): Promise<string[]> {
  if (await real(opts.appsDir) === await real(SHIPPED_APPS_DIR)) return []
  const names = [...(opts.console ? [CONSOLE_FOLDER] : []), ...(opts.examples ? EXAMPLE_FOLDERS : [])]
  return names.map((name) => path.join(SHIPPED_APPS_DIR, name))
}
