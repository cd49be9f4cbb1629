/**
 * What restarts the service under `npm run dev`, and that every save is seen, including saves that
 * replace the file (write aside, rename over), which Node 20's recursive watch lost after the first.
 */
import t from 'tap'
import fs from 'node:fs/promises'
import path from 'node:path'
import { restartsFor, watchChanges, type Change } from '../../src/dev/watch.js'
import { tempDir, waitFor } from '../helpers/context.js'

t.test('which changed files restart the service', async (t) => {
  const apps = { dir: '/apps', publicAt: 1 as const }
  const linkedApp = { dir: '/elsewhere/my-app', publicAt: 0 as const }
  const src = { dir: '/src', service: true }
  t.ok(restartsFor('my-app/index.js', apps), 'an app module')
  t.ok(restartsFor('my-app/lib/util.ts', apps), 'a module deeper in the app')
  t.ok(restartsFor('my-app/package.json', apps), "the app's package.json")
  t.ok(restartsFor('new-app', apps), 'a new app folder')
  t.ok(restartsFor('my-app/public', apps), 'a public/ folder appearing (whether an app has a UI is decided at start)')
  t.ok(restartsFor('my-app/public/.service-external-resources.json', apps), 'the CSP source, read at start')
  t.notOk(restartsFor('my-app/public/index.html', apps), 'a UI file: served fresh without a restart')
  t.notOk(restartsFor('my-app/public/js/app.js', apps), 'a UI file deeper in public/')
  t.notOk(restartsFor('my-app/public/.hidden.json', apps), 'another dot file in public/')
  t.ok(restartsFor('my-app/lib/public/x.js', apps), 'a folder named public deeper in the app is code like any other')
  t.notOk(restartsFor('my-app/.index.js.swp', apps), "an editor's swap file")
  t.notOk(restartsFor('my-app/index.js~', apps), 'a backup file')
  t.notOk(restartsFor('.git/index', apps), 'a dot folder')
  t.notOk(restartsFor('my-app/node_modules/dep/index.js', apps), 'node_modules')
  t.ok(restartsFor('index.js', linkedApp), 'a linked app: its own files')
  t.notOk(restartsFor('public/index.html', linkedApp), "a linked app's public/")
  t.ok(restartsFor('public/index.html', src), 'in src/, public means nothing')
  t.ok(restartsFor('routes/aktor.ts', src))
})

t.test('every save is one change, named by the file saved, including saves that replace the file', async (t) => {
  const dir = await tempDir(t, 'reaktor-watch-')
  await fs.mkdir(path.join(dir, 'my-app', 'public'), { recursive: true })
  const file = path.join(dir, 'my-app', 'index.js')
  await fs.writeFile(file, 'v0')
  const changes: Change[] = []
  const watcher = watchChanges([{ dir, publicAt: 1 }], 50, (change) => { changes.push(change) })
  t.teardown(() => { watcher.close() })

  const saves = [
    async (n: number) => { await fs.writeFile(file, `v${n}`) },
    // Write aside and rename over, as `sed -i` and editors' safe writes do.
    async (n: number) => {
      await fs.writeFile(path.join(dir, 'my-app', '.index.js.tmp'), `v${n}`)
      await fs.rename(path.join(dir, 'my-app', '.index.js.tmp'), file)
    },
    async (n: number) => {
      await fs.writeFile(path.join(dir, 'my-app', 'index.js.new'), `v${n}`)
      await fs.rename(path.join(dir, 'my-app', 'index.js.new'), file)
    }
  ]
  for (let n = 1; n <= 6; n++) {
    await saves[n % saves.length](n)
    await waitFor(() => changes.length === n, { what: `save ${n} to be seen` })
    t.equal(path.relative(dir, path.resolve(changes[n - 1].file)), path.join('my-app', 'index.js'), `save ${n} names the saved file`)
    t.equal(changes[n - 1].service, false)
  }

  await fs.mkdir(path.join(dir, 'my-app', 'lib'))
  await waitFor(() => changes.length === 7, { what: 'the new folder to be seen' })
  await fs.writeFile(path.join(dir, 'my-app', 'lib', 'util.js'), 'x')
  await waitFor(() => changes.length === 8, { what: 'a file in the new folder to be seen' })
  t.equal(path.basename(changes[7].file), 'util.js', 'a folder made after the start is watched too')

  // A UI file alone, then a module: only the module makes a change.
  await fs.writeFile(path.join(dir, 'my-app', 'public', 'index.html'), '<p>')
  await fs.writeFile(file, 'v7')
  await waitFor(() => changes.length === 9, { what: 'the module save' })
  t.equal(path.basename(changes[8].file), 'index.js', 'the public/ file is not what the change names')
})
