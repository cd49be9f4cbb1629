import { register } from 'node:module'

/*
 * Apps import the SDK as `reaktor-service/sdk` (their tests `reaktor-service/testing`), but an
 * app folder has its own package.json, so Node's package self-reference does not reach the
 * service. A resolve hook maps the public specifiers to the running service's own modules: the
 * very module instances the service uses, whether it runs from dist/ (compiled .js) or from src/
 * under tsx (.ts; tsx's hooks then load them). The hook hands the mapped URL on down the chain
 * instead of short-circuiting, so that the hooks registered before it (tsx) still resolve and
 * load it.
 */
const HOOKS = `
let targets = {}
export function initialize (data) { targets = data }
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

let registered = false

/** Registers the resolve hook once per process, before the first app module is imported. */
export function ensureSdkResolution (): void {
  if (registered) return
  register(`data:text/javascript,${encodeURIComponent(HOOKS)}`, { data: sdkTargets() })
  registered = true
}
