import { register } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { MessageChannel, type MessagePort } from 'node:worker_threads'

/*
 * Apps import the SDK as `reaktor-service/sdk` (their tests `reaktor-service/testing`), but an
 * app folder has its own package.json, so Node's package self-reference does not reach the
 * service. A resolve hook maps the public specifiers to the running service's own modules: the
 * very module instances the service uses, whether it runs from dist/ (compiled .js) or from src/
 * under tsx (.ts; tsx's hooks then load them). The hook hands the mapped URL on down the chain
 * instead of short-circuiting, so that the hooks registered before it (tsx) still resolve and
 * load it.
 *
 * Registered hooks run on a thread of their own, and so does Node's default loader then: the
 * warning Node gives for ES module syntax in a `.js` file under a package.json without
 * "type": "module" is emitted there, as raw lines on stderr that would break the JSON log. The
 * hooks thread hands that one warning (by its code) to this thread instead, which turns it into
 * one log line for an app's files and emits it as Node would for any other file.
 */
const TYPELESS_CODE = 'MODULE_TYPELESS_PACKAGE_JSON'
const HOOKS = `
let targets = {}
export function initialize ({ targets: given, port }) {
  targets = given
  const emitWarning = process.emitWarning
  process.emitWarning = function (warning, options, ...rest) {
    const code = typeof options === 'object' && options !== null ? options.code : rest[0]
    if (code === ${JSON.stringify(TYPELESS_CODE)}) return port.postMessage({ warning: String(warning?.message ?? warning) })
    return emitWarning.call(this, warning, options, ...rest)
  }
  port.on('message', (flush) => port.postMessage({ flushed: flush }))
  port.unref()
}
export async function resolve (specifier, context, nextResolve) {
  if (Object.hasOwn(targets, specifier)) return nextResolve(targets[specifier], context)
  return nextResolve(specifier, context)
}
`

/** The specifiers the hook maps, and to what: resolved like the service's own imports. */
function sdkTargets (): Record<string, string> {
  return {
    'reaktor-service/sdk': import.meta.resolve('../sdk/index.js'),
    'reaktor-service/testing': import.meta.resolve('../sdk/testing.js'),
    'reaktor-service': import.meta.resolve('../app.js')
  }
}

let port: MessagePort | undefined
let flushes = 0
const flushed = new Map<number, () => void>()
/** The app folders being imported now, each with the typeless files found in it. */
const collecting = new Map<readonly string[], string[]>()

function inFolder (file: string, dir: string): boolean {
  const relative = path.relative(dir, file)
  return !relative.startsWith('..') && !path.isAbsolute(relative)
}

function onTypelessWarning (message: string): void {
  const url = /file:\/\/\S+/.exec(message)?.[0]
  const file = url === undefined ? undefined : fileURLToPath(url)
  for (const [dirs, files] of collecting) {
    if (file !== undefined && dirs.some((dir) => inFolder(file, dir))) {
      files.push(file)
      return
    }
  }
  process.emitWarning(message, { code: TYPELESS_CODE })
}

/** Registers the hooks once per process, before the first app module is imported. */
export function ensureSdkResolution (): void {
  if (port !== undefined) return
  const channel = new MessageChannel()
  port = channel.port1
  port.on('message', (message: { warning?: string, flushed?: number }) => {
    if (message.warning !== undefined) onTypelessWarning(message.warning)
    if (message.flushed !== undefined) flushed.get(message.flushed)?.()
  })
  port.unref()
  register(`data:text/javascript,${encodeURIComponent(HOOKS)}`, { data: { targets: sdkTargets(), port: channel.port2 }, transferList: [channel.port2] })
}

/** Waits until every message the hooks thread sent before now has been handled. */
async function flushHooks (): Promise<void> {
  if (port === undefined) return
  const id = ++flushes
  const own = port
  own.ref()
  await new Promise<void>((resolve) => {
    flushed.set(id, resolve)
    own.postMessage(id)
  })
  flushed.delete(id)
  own.unref()
}

/**
 * Imports an app's entry module. Also returns the files of the app (in `dirs`: its folder and the
 * folder's real path) that Node had to reparse as ES modules for want of "type": "module"; Node's
 * own warning for them is not printed.
 */
export async function importAppModule (url: string, dirs: readonly string[]): Promise<{ mod: Record<string, unknown>, typeless: string[] }> {
  ensureSdkResolution()
  const typeless: string[] = []
  collecting.set(dirs, typeless)
  try {
    const mod = await import(url) as Record<string, unknown>
    return { mod, typeless }
  } finally {
    await flushHooks()
    collecting.delete(dirs)
  }
}
