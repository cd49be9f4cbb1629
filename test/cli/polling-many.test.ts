/**
 * `reaktor polling list` over more reaktors than one page of the list API holds (1,000): every
 * match listed once, in id order, as the API's filters select them.
 */
import t from 'tap'
import { ADMIN_ENV, apiAs, loginToken } from '../helpers/auth.js'
import { listeningApp } from '../helpers/browser.js'
import { cliHome, runCli } from '../helpers/cli.js'
import { FAST_SCHEDULER, probe } from '../helpers/scheduler.js'

const COUNT = 1_100

const { app, base } = await listeningApp(t, {
  env: ADMIN_ENV,
  scheduler: FAST_SCHEDULER,
  apps: [{
    name: 'many-app',
    version: '1.0.0',
    // Stopped, so nothing changes while the test reads; every hundredth has a label to find.
    pollingReaktors: Array.from({ length: COUNT }, (_, i) => probe(`many-${String(i).padStart(4, '0')}`, () => false, {
      interval: '1h',
      autoStart: false,
      label: i % 100 === 0 ? `Hundredth ${i}` : undefined
    }).registration)
  }]
})
const session = await loginToken(app)
const call = apiAs(app, session)
const env = { XDG_CONFIG_HOME: await cliHome(t), REAKTOR_URL: base, REAKTOR_TOKEN: session }

async function apiIds (query: string): Promise<string[]> {
  const ids: string[] = []
  for (let offset = 0; ; offset += 1000) {
    const page = (await call('GET', `/api/v1/polling?${query}&limit=1000&offset=${offset}`)).body
    ids.push(...page.pollingReaktors.map((s: any) => s.reaktorDefinitionId))
    if (offset + 1000 >= page.total) return ids
  }
}

t.test('more matches than a page: all of them, once, by id; a few: those the API selects', async (t) => {
  const [stopped, hundredth, bad] = await Promise.all([
    runCli(['--json', 'polling', 'list', '--state', 'stopped'], { env }),
    runCli(['polling', 'list', '-q', 'hundredth', '--app', 'many-app'], { env }),
    runCli(['polling', 'list', '-q', ''], { env })
  ])
  t.equal(stopped.code, 0, stopped.stderr)
  const listed = JSON.parse(stopped.stdout).pollingReaktors.map((s: any) => s.reaktorDefinitionId)
  t.equal(listed.length, COUNT, 'every stopped reaktor')
  t.same(listed, await apiIds('state=stopped'), 'the API\'s pages, in the same order')
  t.equal(new Set(listed).size, COUNT, 'each once')

  t.equal(hundredth.code, 0, hundredth.stderr)
  const rows = hundredth.stdout.trimEnd().split('\n').slice(1).map((line) => line.split(/ {2,}/)[0])
  t.same(rows, await apiIds('q=hundredth&app=many-app'), '-q and --app: the API\'s selection')
  t.equal(rows.length, COUNT / 100)

  t.equal(bad.code, 2, 'a filter value the API refuses: a usage error')
  t.match(bad.stderr, /q must be 1 to 200 characters/)
})
