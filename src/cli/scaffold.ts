import type { AppPlan } from './app-plan.js'
import { uiFiles } from './scaffold-ui.js'

// The entry module as the app's test imports it (named here: the test's import is template text).
const ENTRY_FROM_TEST = '../index.js'

/**
 * The files of a new app, by path relative to its folder. `testCommand` is the `npm test` script:
 * the app's own package.json cannot reach the service's modules, so its tests run through
 * `reaktor test`, which can.
 */
export function appFiles (plan: AppPlan, opts: { ui: boolean, testCommand: string }): Record<string, string> {
  const files: Record<string, string> = {
    'package.json': JSON.stringify({
      name: plan.name,
      version: plan.version,
      description: `The reaktor app ${plan.name}: one polling reaktor and one aktor.`,
      private: true,
      type: 'module',
      main: 'index.js',
      scripts: { test: opts.testCommand },
      reaktor: { settings: { greeting: 'Hello' } }
    }, null, 2) + '\n',
    'index.js': entryModule(plan),
    'test/app.test.js': appTest(plan)
  }
  return opts.ui ? { ...files, ...uiFiles(plan) } : files
}

function entryModule (plan: AppPlan): string {
  return `// @ts-check
/*
 * The reaktor app ${plan.name}. The service loads this module at start-up (restart it, or run
 * \`npm run dev\`, to load a change). Settings come from package.json "reaktor.settings"; each
 * can be overridden by an environment variable of the service (docs/apps.md "Settings").
 */
import { definePollingReaktor, defineReaktor } from 'reaktor-service/sdk'

export const pollingReaktors = [
  definePollingReaktor({
    // Unique across all apps: the id of /api/v1/polling/${plan.pollingId}/… and \`reaktor polling start ${plan.pollingId}\`.
    reaktorDefinitionId: '${plan.pollingId}',
    interval: '1m',
    autoStart: false,
    label: '${plan.name} poller',
    description: 'Checks for work once a minute (start it from the UI or with reaktor polling start).',
    createReaktor: () => async (_input, context) => {
      context.log.info({}, 'checking for work')
      // true: more work is waiting, run again at once; false: none, wait for the interval.
      return false
    }
  })
]

export const reaktors = [
  defineReaktor({
    // POST /api/v1/aktor/${plan.aktorId} with a JSON body such as {"name": "Ada"}.
    reaktorDefinitionId: '${plan.aktorId}',
    label: 'Say hello',
    // A body that does not match is answered 400 before the aktor runs.
    inputSchema: {
      type: 'object',
      properties: { name: { type: 'string', minLength: 1, maxLength: 100 } },
      required: ['name'],
      additionalProperties: false
    },
    createReaktor: ({ settings }) => async ({ name }, context) => {
      context.log.info({ name }, 'saying hello')
      return { message: \`\${String(settings.greeting)}, \${name}!\` }
    }
  })
]
`
}

function appTest (plan: AppPlan): string {
  return `// The app's tests: run them with \`npx reaktor test <this app's folder>\` from the service's checkout
// (or \`npm test\` here; \`npm test -- --test-name-pattern=hello\` runs only the tests so named).
// reaktor-service/testing runs one reaktor as the service would, without one.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import { runAktor, runPollingReaktor } from 'reaktor-service/testing'
import { pollingReaktors, reaktors } from '${ENTRY_FROM_TEST}'

// The defaults of package.json "reaktor.settings", as the service reads them.
const { settings } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).reaktor

const poller = pollingReaktors.find((r) => r.reaktorDefinitionId === '${plan.pollingId}')
const hello = reaktors.find((r) => r.reaktorDefinitionId === '${plan.aktorId}')

test('the poller finds no work and logs that it looked', async () => {
  const { result, logs } = await runPollingReaktor(poller, { settings })
  assert.equal(result, false)
  assert.deepEqual(logs.map((line) => line.msg), ['checking for work'])
})

test('hello greets with the greeting setting', async () => {
  const { output } = await runAktor(hello, { name: 'Ada' }, { settings })
  assert.deepEqual(output, { message: 'Hello, Ada!' })
  const other = await runAktor(hello, { name: 'Ada' }, { settings: { ...settings, greeting: 'Good morning' } })
  assert.deepEqual(other.output, { message: 'Good morning, Ada!' })
})

test('hello without a name is refused, as the service answers 400', async () => {
  await assert.rejects(runAktor(hello, {}, { settings }), { statusCode: 400 })
})
`
}
