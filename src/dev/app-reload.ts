import path from 'node:path'
import type { AppCatalog, AppChange } from '../apps/catalog.js'
import { plainMessage } from '../apps/import-errors.js'
import { isDirectory, loadApp, type LoaderLog } from '../apps/loader.js'
import { RegistrationError } from '../apps/registry.js'
import type { LoadedApp } from '../apps/types.js'
import type { ReloadOutcome } from './supervised.js'

interface Log extends LoaderLog {
  error: (obj: object, msg: string) => void
}

export interface AppReloadOptions {
  catalog: AppCatalog
  /** The environment app settings are read from, as at start. */
  env: Record<string, string | undefined>
  log: Log
}

/** Why `next` cannot take the place of `current` in a running service, if it cannot. */
function needsRestart (current: LoadedApp, next: LoadedApp): string | undefined {
  const was = `${current.name}@${current.version}`
  const now = `${next.name}@${next.version}`
  // The UI's URL, and the check that no published app has the name, are set at start.
  if (now !== was) return `its package.json now names ${now}, not ${was}`
  if ((next.publicDir === undefined) !== (current.publicDir === undefined)) return `its public/ folder ${next.publicDir === undefined ? 'went' : 'appeared'}`
  return undefined
}

/**
 * Under `npm run dev`: loads the app folder `folder` (as REAKTOR_APPS_DIR lists it) afresh and
 * switches the app to it in the running service (AppCatalog.replace): every reaktor keeps its state
 * and owner, and the next run and the next aktor call use the new code. Code that does not load
 * (a syntax error, a registration that a start would refuse) is logged as a start would say it,
 * and the app keeps running the version it ran. What a switch cannot do (a new app, a name or
 * version changed, a UI appearing or going) asks the supervisor for a restart.
 */
export async function reloadAppFolder (folder: string, { catalog, env, log }: AppReloadOptions): Promise<ReloadOutcome> {
  const dir = path.resolve(folder)
  const current = catalog.registry.apps.find((app) => app.dir !== undefined && path.resolve(app.dir) === dir)
  if (current === undefined) return { outcome: 'restart', reason: `no app runs from ${folder} yet` }
  if (!await isDirectory(dir)) return { outcome: 'restart', reason: `${folder} is gone` }
  const app = `${current.name}@${current.version}`
  const failed = (err: unknown): ReloadOutcome => {
    log.error({ app, dir }, `app ${app} was not reloaded; it keeps running the version it ran: ${plainMessage(err)}`)
    return { outcome: 'failed', app }
  }
  let next: LoadedApp
  try {
    next = await loadApp(dir, env, log, { fresh: true })
  } catch (err) {
    return failed(err)
  }
  const reason = needsRestart(current, next)
  if (reason !== undefined) return { outcome: 'restart', reason }
  let change: AppChange
  try {
    change = await catalog.replace(current.name, next)
  } catch (err) {
    // Refused as a start would refuse it, before anything changed. Anything else (a listener's
    // failure, after the switch) is for a restart to put right.
    if (err instanceof RegistrationError) return failed(err)
    throw err
  }
  log.info({ app, dir, added: change.added, changed: change.changed, removed: change.removed }, `app ${app} reloaded in place`)
  return { outcome: 'reloaded', app }
}
