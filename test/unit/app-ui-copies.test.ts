/**
 * The browser code that the example apps and the page of `reaktor new-app --ui` have in common is
 * written out in each of them: an app UI is served from its own public/ alone, and the drain demo
 * and the new page are one classic script each. Here the copies are held to one text, so that none
 * drifts again (the console's login redirect kept the view's #hash, the other two dropped it).
 */
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { planApp } from '../../src/cli/app-plan.js'
import { uiFiles } from '../../src/cli/scaffold-ui.js'
import { EXAMPLE_APPS_DIR } from '../helpers/paths.js'

const NEW_APP = '.new-app/public/app.js'
const DRAIN_DEMO = 'drain-demo/public/app.js'
const CONSOLE_API = 'reaktor-console/public/js/api.js'

const read = (file: string): string => fs.readFileSync(path.join(EXAMPLE_APPS_DIR, file), 'utf8')

/**
 * The top-level declaration of `name` in `source`, with the doc comment right above it: up to the
 * line that closes it (or its first line alone, when that closes it). A leading `export` is left
 * out: the console's modules export what the classic scripts declare.
 */
function declaration (source: string, name: string): string | undefined {
  const lines = source.split('\n')
  const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  const start = lines.findIndex((line) => new RegExp(`^(export )?(async function|function|class|const) ${escaped}[ =(]`).test(line))
  if (start < 0) return undefined
  let first = start
  if (lines[start - 1]?.trim() === '*/') first = lines.findLastIndex((line, i) => i < start && line.startsWith('/**'))
  const end = /[{(]$/.test(lines[start]) ? lines.findIndex((line, i) => i > start && /^[})]/.test(line)) : start
  return lines.slice(first, end + 1).join('\n').replace(/^export /m, '')
}

t.test('the login redirect, #hash kept, is one text in the console, the drain demo and the new app', async (t) => {
  const reference = read(NEW_APP)
  t.match(declaration(reference, 'goToLogin'), /window\.location\.search \+ window\.location\.hash\n/, 'the place in the page goes along')
  for (const name of ['goToLogin', 'LoginRequired']) {
    t.ok(declaration(reference, name), `the new app declares ${name}`)
    for (const file of [DRAIN_DEMO, CONSOLE_API]) {
      t.equal(declaration(read(file), name), declaration(reference, name), `${name} of ${file}`)
    }
  }
})

t.test('the drain demo and the new app share the API wrapper and the page helpers as one text', async (t) => {
  const demo = read(DRAIN_DEMO)
  const reference = read(NEW_APP)
  for (const name of ['$', 'api', 'showMessage']) {
    t.ok(declaration(reference, name), `the new app declares ${name}`)
    t.equal(declaration(demo, name), declaration(reference, name), name)
  }
})

t.test('new-app --ui fills in the template, and its stylesheet is the drain demo\'s', async (t) => {
  const files = uiFiles(planApp('@acme/x'))
  t.equal(files['public/style.css'], read('.new-app/public/style.css'))
  t.equal(read('drain-demo/public/style.css'), read('.new-app/public/style.css'), 'the drain demo\'s stylesheet and the template\'s are one text')
  t.equal(files['public/favicon.svg'], read('.new-app/public/favicon.svg'))
  for (const file of ['public/index.html', 'public/app.js']) t.notMatch(files[file], /\{\{\w+\}\}/, `${file}: every placeholder filled in`)
  t.match(files['public/app.js'], '\nconst AKTOR_ID = "acme-x-hello"\nconst POLLER_ID = "acme-x-poll"\n')
  t.match(files['public/index.html'], '<title>@acme/x</title>')
})
