/**
 * Loaded first into every test process (package.json, "tap"."node-arg"). tap tracks the processes
 * a test spawns, for coverage, which this suite does not collect: it puts its loader hooks in the
 * NODE_OPTIONS of every child (through its own process-on-spawn listener as well as the
 * environment), and a service or CLI process then spends about twice as much CPU starting. The
 * children of a test are left untracked; the test process itself stays as tap runs it.
 */
const TRACKER = '@tapjs/processinfo'

function withoutTracker (options: string | undefined): string | undefined {
  if (options === undefined) return undefined
  const kept = (options.match(/"(?:[^"\\]|\\.)*"|\S+/g) ?? []).filter((o) => !o.includes(TRACKER))
  return kept.length === 0 ? undefined : kept.join(' ')
}

const options = withoutTracker(process.env.NODE_OPTIONS)
if (options === undefined) delete process.env.NODE_OPTIONS
else process.env.NODE_OPTIONS = options

// process-on-spawn (tap's dependency) keeps its listeners in a global singleton.
const spawnHooks = (globalThis as Record<symbol, { listeners?: unknown[] } | undefined>)[Symbol.for('process-on-spawn@*:singletonId')]
if (Array.isArray(spawnHooks?.listeners)) spawnHooks.listeners.length = 0
