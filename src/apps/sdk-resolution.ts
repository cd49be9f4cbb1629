import { readFileSync } from 'node:fs'
import module, { register } from 'node:module'
import { fileURLToPath } from 'node:url'
import { MessageChannel, type MessagePort } from 'node:worker_threads'
import { atOrBelow } from '../lib/path-below.js'

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
 * one log line for an app's files and emits it as Node would for any other file. It also reports
 * each file URL it loads: when an import fails with a SyntaxError that Node does not locate, the
 * files loaded during that import are where it is, the most recent first.
 *
 * Reloading an app in place (the dev loop): Node imports a module URL once per process, so the
 * entry is imported with a query naming the reload (`index.js?reaktor-reload=3`), and the resolve
 * hook gives every file that module imports, and they import in turn, the same query: the app's
 * own files are imported afresh, with their own paths (in stack traces and error messages too),
 * while its dependencies (under node_modules) and the service's modules stay the instances they were.
 *
 * tsx reads each ES module it loads with a lexer of its own, which stops at a syntax error with
 * only `Parse error <file>:1:1`: a module it cannot read is handed to Node as it is on disk, whose
 * parse then fails with the reason and the place, as without tsx (a valid module the lexer cannot
 * read then loads without tsx's rewrite of dynamic imports of CommonJS, which it does not need).
 */
const TYPELESS_CODE = 'MODULE_TYPELESS_PACKAGE_JSON'
/** The query parameter of a module URL that names the reload it was imported for. */
export const RELOAD_PARAM = 'reaktor-reload'
/** tsx's lexer's error (es-module-lexer's): the file, then always 1:1. */
const LEXER_ERROR = /^Parse error .+:\d+:\d+$/
const HOOKS = `
import { readFile } from 'node:fs/promises'
let targets = {}
let serviceRoot
let hooksPort
export function initialize ({ targets: given, root, port }) {
  targets = given
  serviceRoot = root
  const emitWarning = process.emitWarning
  process.emitWarning = function (warning, options, ...rest) {
    const code = typeof options === 'object' && options !== null ? options.code : rest[0]
    if (code === ${JSON.stringify(TYPELESS_CODE)}) return port.postMessage({ warning: String(warning?.message ?? warning) })
    return emitWarning.call(this, warning, options, ...rest)
  }
  port.on('message', (flush) => port.postMessage({ flushed: flush }))
  port.unref()
  hooksPort = port
}
export async function resolve (specifier, context, nextResolve) {
  if (Object.hasOwn(targets, specifier)) return nextResolve(targets[specifier], context)
  return reloaded(await nextResolve(specifier, context), context.parentURL)
}
function reloaded (resolved, parentURL) {
  // Most imports come from no reloaded module: no URL is parsed for them.
  if (typeof parentURL !== 'string' || !parentURL.includes(${JSON.stringify(RELOAD_PARAM)}) || !parentURL.startsWith('file:') || !resolved.url.startsWith('file:')) return resolved
  const reload = new URL(parentURL).searchParams.get(${JSON.stringify(RELOAD_PARAM)})
  if (reload === null) return resolved
  const url = new URL(resolved.url)
  if (url.pathname.includes('/node_modules/') || url.href.startsWith(serviceRoot) || url.searchParams.has(${JSON.stringify(RELOAD_PARAM)})) return resolved
  url.searchParams.set(${JSON.stringify(RELOAD_PARAM)}, reload)
  return { ...resolved, url: url.href }
}
export async function load (url, context, nextLoad) {
  let result
  try {
    result = await nextLoad(url, context)
  } catch (err) {
    if (!url.startsWith('file:') || !${LEXER_ERROR}.test(String(err?.message))) throw err
    result = { format: 'module', source: await readFile(new URL(url)), shortCircuit: true }
  }
  if (url.startsWith('file:')) hooksPort?.postMessage({ loaded: url })
  return result
}
`

/** The specifiers the hook maps, and to what: resolved like the service's own imports. */
function sdkTargets (): Record<string, string> {
  return {
    'reaktor-service/sdk': import.meta.resolve('../sdk/index.js'),
    'reaktor-service/testing': import.meta.resolve('../testing/index.js'),
    'reaktor-service': import.meta.resolve('../app.js')
  }
}

let port: MessagePort | undefined
let flushes = 0
const flushed = new Map<number, () => void>()

/** What one import of an app found out, filled in while it runs. */
export interface ImportTrace {
  /** Files of the app Node reparsed as ES modules, each with the package.json Node names for the fix. */
  typeless: Array<{ file: string, packageJson: string | undefined }>
  /** Files loaded during the import, the most recent first. */
  loaded: string[]
}
/** The app folders being imported now, each with what its import found. */
const collecting = new Map<readonly string[], ImportTrace>()

function collectorOf (file: string): ImportTrace | undefined {
  for (const [dirs, trace] of collecting) {
    if (dirs.some((dir) => atOrBelow(file, dir))) return trace
  }
  return undefined
}

function onTypelessWarning (message: string): void {
  const url = /file:\/\/\S+/.exec(message)?.[0]
  const file = url === undefined ? undefined : fileURLToPath(url)
  const trace = file === undefined ? undefined : collectorOf(file)
  if (file === undefined || trace === undefined) return process.emitWarning(message, { code: TYPELESS_CODE })
  // Node names the package.json that decided the file's type: the nearest one, which may be a
  // nested package's or a dependency's rather than the app's own.
  const packageJson = /add "type": "module" to (.+?package\.json)\.?\s*$/m.exec(message)?.[1]
  trace.typeless.push({ file, packageJson })
}

function onLoaded (url: string): void {
  const file = fileURLToPath(url)
  collectorOf(file)?.loaded.unshift(file)
}

interface Loaded { format?: string | null, source?: unknown, shortCircuit?: boolean }
type SyncLoad = (url: string, context: object, nextLoad: (url: string, context: object) => Loaded) => Loaded
/** Node's in-thread hooks (Node 22.15 and later); the Node types this checkout has do not declare them yet. */
type RegisterHooks = (hooks: { load: SyncLoad }) => unknown

/**
 * The lexer's fallback (see above) as an in-thread hook too: where Node has `module.registerHooks`,
 * tsx registers its hooks with it, outside the chain of the hooks thread, and the fallback must
 * come after tsx's to see its error.
 */
function registerLexerFallback (): void {
  const registerHooks = (module as unknown as { registerHooks?: RegisterHooks }).registerHooks
  if (typeof registerHooks !== 'function') return
  registerHooks({
    load: (url, context, nextLoad) => {
      try {
        return nextLoad(url, context)
      } catch (err) {
        if (!url.startsWith('file:') || !(err instanceof Error) || !LEXER_ERROR.test(err.message)) throw err
        return { format: 'module', source: readFileSync(new URL(url)), shortCircuit: true }
      }
    }
  })
}

/**
 * Registers the hooks once per process, before the first app module is imported. Registering
 * starts a thread, which a permission model without --allow-worker forbids: then it throws, and
 * the next import tries again rather than waiting on hooks that never ran.
 */
export function ensureSdkResolution (): void {
  if (port !== undefined) return
  const channel = new MessageChannel()
  try {
    register(`data:text/javascript,${encodeURIComponent(HOOKS)}`, { data: { targets: sdkTargets(), root: new URL('../', import.meta.url).href, port: channel.port2 }, transferList: [channel.port2] })
  } catch (err) {
    channel.port1.close()
    channel.port2.close()
    throw new Error(`the module hooks that let apps import reaktor-service/sdk cannot be registered: ${(err as Error).message}`, { cause: err })
  }
  registerLexerFallback()
  port = channel.port1
  port.on('message', (message: { warning?: string, flushed?: number, loaded?: string }) => {
    if (message.warning !== undefined) onTypelessWarning(message.warning)
    if (message.loaded !== undefined) onLoaded(message.loaded)
    if (message.flushed !== undefined) flushed.get(message.flushed)?.()
  })
  port.unref()
}

/** How long an import waits for the hooks thread's last messages: they are hints, not results. */
const FLUSH_LIMIT_MS = 1000

/** Waits until every message the hooks thread sent before now has been handled, or a second passed. */
async function flushHooks (): Promise<void> {
  if (port === undefined) return
  const id = ++flushes
  const own = port
  let timer: NodeJS.Timeout | undefined
  own.ref()
  try {
    await new Promise<void>((resolve) => {
      flushed.set(id, resolve)
      timer = setTimeout(resolve, FLUSH_LIMIT_MS)
      timer.unref()
      own.postMessage(id)
    })
  } finally {
    clearTimeout(timer)
    flushed.delete(id)
    own.unref()
  }
}

/** An import still unfinished after its limit (it cannot be stopped; the caller gives up on it). */
export class ImportTooLong extends Error {}

/**
 * Imports an app's entry module, filling `trace` (for `dirs`: the app folder and its real path)
 * with the files Node had to reparse as ES modules for want of "type": "module" (Node's own
 * warning for them is not printed) and the files loaded, also when the import fails. Rejects with
 * ImportTooLong when it has not finished after `limitMs`.
 */
export async function importAppModule (url: string, dirs: readonly string[], trace: ImportTrace, limitMs: number): Promise<Record<string, unknown>> {
  ensureSdkResolution()
  collecting.set(dirs, trace)
  let timer: NodeJS.Timeout | undefined
  try {
    const tooLong = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(new ImportTooLong()), limitMs) })
    return await Promise.race([import(url) as Promise<Record<string, unknown>>, tooLong])
  } finally {
    clearTimeout(timer)
    await flushHooks()
    collecting.delete(dirs)
  }
}
