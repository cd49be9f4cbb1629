import { readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { escapeHtml } from '../lib/escape-html.js'
import type { AppPlan } from './app-plan.js'
import { CliError, EXIT } from './context.js'

/**
 * The service's reaktor-apps/: beside src/ in a checkout, beside dist/ in a build (the Docker
 * image copies it there), and this module is one folder below either.
 */
const SHIPPED_APPS = new URL('../../reaktor-apps/', import.meta.url)

/**
 * The `public/` of a new app (`reaktor new-app --ui`), by where each file comes from under
 * reaktor-apps/. The page is real files, not strings here, so that its script is linted and
 * type-checked as the example apps' are; it lives in a dot-folder, where the service finds no app.
 * The stylesheet is the look of the example apps: the template's and the drain demo's are one text,
 * and so is what the page's script shares with the drain demo's (the API wrapper and its login
 * redirect); test/unit/app-ui-copies.test.ts holds them byte-identical. The template keeps its own
 * copy so that an operator who deletes the example apps keeps `new-app --ui`.
 */
const UI_SOURCES = {
  'public/index.html': '.new-app/public/index.html',
  'public/app.js': '.new-app/public/app.js',
  'public/style.css': '.new-app/public/style.css',
  // Without an icon of its own a browser asks the service for /favicon.ico, which it has not.
  'public/favicon.svg': '.new-app/public/favicon.svg'
}

/**
 * How a value is written into a template of each kind: as HTML text, or inside a JavaScript "…"
 * string literal (or a comment). Other files are copied as they are.
 */
const ESCAPES: Record<string, (value: string) => string> = {
  '.html': escapeHtml,
  '.js': (value) => JSON.stringify(value).slice(1, -1)
}

/**
 * The UI files, the template's `{{name}}`, `{{aktorId}}` and `{{pollingId}}` filled in. The scripts
 * stay in files (the app UI policy blocks inline ones); they take the session token from the
 * helper the service injects, and a 401 leads to the login page and back.
 */
export function uiFiles (plan: AppPlan): Record<string, string> {
  const values = new Map([['name', plan.name], ['aktorId', plan.aktorId], ['pollingId', plan.pollingId]])
  return Object.fromEntries(Object.entries(UI_SOURCES).map(([file, source]) => {
    const text = readTemplate(source)
    const escape = ESCAPES[path.extname(file)]
    return [file, escape === undefined ? text : text.replace(/\{\{(\w+)\}\}/g, (_, key: string) => {
      const value = values.get(key)
      // A mistake in the template, which the new-app tests would meet first.
      if (value === undefined) throw new Error(`${source} names {{${key}}}, which new-app does not fill in`)
      return escape(value)
    })]
  }))
}

function readTemplate (source: string): string {
  const file = new URL(source, SHIPPED_APPS)
  try {
    return readFileSync(file, 'utf8')
  } catch (err) {
    // Only an install that lost part of reaktor-apps/ comes here: say which file, before anything is written.
    throw new CliError(EXIT.error, `cannot read the template ${fileURLToPath(file)} of --ui (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): the service's reaktor-apps/ is incomplete; nothing was written`)
  }
}
