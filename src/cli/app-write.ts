/**
 * Writing a new app into an apps folder so that the service never sees half of it, and refusing
 * one the service would refuse to load next to the apps already there.
 */
import { randomBytes } from 'node:crypto'
import { rmSync } from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import { appFolders } from '../apps/loader.js'
import type { AppPlan } from './app-plan.js'
import { ownFiles } from './app-files.js'
import { CliError, EXIT } from './context.js'

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const

/**
 * The apps folder, created when missing but not its parents: a mistyped `--dir` must not silently
 * grow a chain of folders the service never reads. True when it was created.
 */
export async function ensureAppsDir (appsDir: string): Promise<boolean> {
  try {
    await fs.mkdir(appsDir)
    return true
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'EEXIST') {
      if (!(await fs.stat(appsDir)).isDirectory()) throw new CliError(EXIT.error, `the apps folder ${appsDir} exists and is not a folder; nothing was written`)
      return false
    }
    if (code === 'ENOENT') throw new CliError(EXIT.error, `the apps folder ${appsDir} cannot be created: ${path.dirname(appsDir)} does not exist (create it first); nothing was written`)
    if (code === 'ENOTDIR') throw new CliError(EXIT.error, `the apps folder ${appsDir} cannot be created: a part of its path is a file; nothing was written`)
    throw new CliError(EXIT.error, `cannot create the apps folder ${appsDir}: ${(err as Error).message}`)
  }
}

/** A folder that is missing or empty may take the app; anything in it is never overwritten. True when it exists (empty). */
async function emptyOrMissing (dir: string): Promise<boolean> {
  let entries: string[]
  try {
    entries = await fs.readdir(dir)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return false
    throw new CliError(EXIT.error, code === 'ENOTDIR' ? `${dir} exists and is not a folder; nothing was written` : `cannot read ${dir}: ${(err as Error).message}`)
  }
  if (entries.length > 0) throw new CliError(EXIT.error, `${dir} already exists and is not empty; nothing was written (choose another name or --dir)`)
  return true
}

/**
 * Writes `files` as the folder `dir`, all or nothing: into a dot-folder next to it (the loader
 * passes over dot-folders, so a service starting meanwhile sees nothing), renamed into place once
 * complete. A failed write (a full disk, a file size limit) or an interrupt leaves no trace.
 */
export async function writeApp (dir: string, files: Record<string, string>): Promise<void> {
  const existed = await emptyOrMissing(dir)
  const staging = path.join(path.dirname(dir), `.${path.basename(dir)}.new-${randomBytes(4).toString('hex')}`)
  // Synchronous: the interrupt handler raises the signal again right after it.
  const discard = (): void => { rmSync(staging, { recursive: true, force: true }) }
  // Interrupted: the staging folder goes, then the signal is raised again to end as it would have.
  const interrupted = (signal: NodeJS.Signals): void => {
    for (const s of SIGNALS) process.off(s, interrupted)
    discard()
    process.kill(process.pid, signal)
  }
  for (const s of SIGNALS) process.on(s, interrupted)
  let removed = false
  // Past a file size limit the write is to fail with EFBIG, and be cleaned up, not to end the process.
  const overLimit = (): void => {}
  process.on('SIGXFSZ', overLimit)
  try {
    await fs.mkdir(staging)
    for (const [file, content] of Object.entries(files)) {
      const target = path.join(staging, file)
      await fs.mkdir(path.dirname(target), { recursive: true })
      await fs.writeFile(target, content, { flag: 'wx' })
    }
    // rename() replaces only an empty folder on some systems and never on others: take it away first.
    if (existed) await fs.rmdir(dir)
    removed = existed
    await fs.rename(staging, dir)
  } catch (err) {
    discard()
    // The user's empty folder is put back as it was.
    if (removed) await fs.mkdir(dir).catch(() => {})
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOTEMPTY' || code === 'EEXIST' || code === 'ENOTDIR') throw new CliError(EXIT.error, `${dir} appeared while the app was written; nothing was written`)
    throw new CliError(EXIT.error, `could not write the app to ${dir}: ${(err as Error).message}; nothing was written`)
  } finally {
    for (const s of SIGNALS) process.off(s, interrupted)
    process.off('SIGXFSZ', overLimit)
  }
}

const QUIET = { info: () => {}, warn: () => {} }

/** The apps already in `appsDir` other than the folder `own`, found as the loader finds them, with their package names. */
async function otherApps (appsDir: string, own: string): Promise<Array<{ dir: string, name: unknown }>> {
  const dirs = (await appFolders(appsDir, QUIET).catch(() => [])).filter((dir) => path.basename(dir) !== own)
  const apps: Array<{ dir: string, name: unknown }> = []
  for (const dir of dirs) {
    const text = await fs.readFile(path.join(dir, 'package.json'), 'utf8').catch(() => undefined)
    if (text === undefined) continue
    let name: unknown
    try {
      name = (JSON.parse(text) as { name?: unknown }).name
    } catch {
      // A broken package.json stops the service anyway, and says so; it names no package here.
    }
    apps.push({ dir, name })
  }
  return apps
}

const SCRIPT = /\.[cm]?[jt]s$/
// Enough for any app's own code; a bundle larger than this is not read for ids.
const MAX_SCRIPT_BYTES = 2 * 1024 * 1024

/**
 * Refuses a new app the service would refuse to start with: its package name, or one of its
 * reaktor ids as a string literal, already in another app of the folder. The ids are looked for in
 * the other apps' text, not by importing them: an import runs their code (connections, timers,
 * whatever a module does at load) in a command that only writes files. An id the other app
 * computes is not seen; the service's start then names the clash.
 */
export async function refuseClashes (appsDir: string, plan: AppPlan): Promise<void> {
  const ids = [plan.pollingId, plan.aktorId]
  const literals = ids.map((id) => new RegExp(`(['"\`])${id.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\1`))
  for (const app of await otherApps(appsDir, plan.base)) {
    if (app.name === plan.name) {
      throw new CliError(EXIT.error, `the package name ${plan.name} is taken by the app in ${app.dir}: the service loads each name once; choose another name; nothing was written`)
    }
    // public/ is the UI, served to browsers: it registers nothing (it may well call another app's aktor).
    const code = (await ownFiles(app.dir, ['public'])).filter((f) => SCRIPT.test(f))
    for (const file of code.map((f) => path.join(app.dir, f))) {
      const stat = await fs.stat(file).catch(() => undefined)
      if (stat === undefined || stat.size > MAX_SCRIPT_BYTES) continue
      const text = await fs.readFile(file, 'utf8').catch(() => '')
      const index = literals.findIndex((literal) => literal.test(text))
      if (index >= 0) {
        throw new CliError(EXIT.error, `the reaktor id ${ids[index]} of ${plan.name} is already used in ${file}: ids are unique across all apps of a folder; choose another name; nothing was written`)
      }
    }
  }
}
