/**
 * What reloads the service under `npm run dev` (an app in place, or a restart), and that every save
 * is seen, including saves that replace the file (write aside, rename over), which Node 20's
 * recursive watch lost after the first.
 */
import t from 'tap'
import fsSync from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import { inPlaceFolder, mergeChanges, restartsFor, watchChanges, watchFailure, type Change, type WatchedFolder } from '../../src/dev/watch.js'
import { tempDir } from '../helpers/temp-dir.js'
import { waitFor } from '../helpers/timing.js'

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
  t.notOk(restartsFor('my-app/#index.js#', apps), "Emacs' auto-save file")
  t.notOk(restartsFor('my-app/.#index.js', apps), "Emacs' lock file")
  t.notOk(restartsFor('my-app/4913', apps), "vim's probe that it may write in the folder")
  t.notOk(restartsFor('my-app/5036', apps), "vim's next probe, when 4913 exists")
  t.ok(restartsFor('my-app/4914', apps), 'another file named by a number')
  t.notOk(restartsFor('my-app/index.js.swp', apps), "vim's swap file, not hidden (its 'directory' option)")
  t.notOk(restartsFor('my-app/index.js.swo', apps), "vim's second swap file")
  t.notOk(restartsFor('my-app/index.js.swx', apps), "vim's swap probe")
  t.notOk(restartsFor('my-app/index.js___jb_tmp___', apps), "JetBrains' safe write: the new content")
  t.notOk(restartsFor('my-app/index.js___jb_old___', apps), "JetBrains' safe write: the old file")
  t.ok(restartsFor('my-app/swap.js', apps), 'a module whose name only looks like one of them')
  t.notOk(restartsFor('.git/index', apps), 'a dot folder')
  t.notOk(restartsFor('my-app/node_modules/dep/index.js', apps), 'node_modules')
  t.ok(restartsFor('index.js', linkedApp), 'a linked app: its own files')
  t.notOk(restartsFor('public/index.html', linkedApp), "a linked app's public/")
  t.ok(restartsFor('public/index.html', src), 'in src/, public means nothing')
  t.ok(restartsFor('routes/aktor.ts', src))
  const parent = { dir: '/work', only: 'apps' }
  t.ok(restartsFor('apps', parent), 'the apps folder appearing or going, seen from its parent')
  t.notOk(restartsFor('other', parent), 'anything else in its parent')
})

t.test('which changes reload an app in place, and which restart the service', async (t) => {
  const apps = { dir: '/apps', publicAt: 1 as const }
  const linkedApp = { dir: '/elsewhere/my-app', shownAs: '/apps/linked', publicAt: 0 as const }
  t.equal(inPlaceFolder('my-app/index.js', apps), '/apps/my-app', 'an app module: its folder, in the apps folder')
  t.equal(inPlaceFolder('my-app/lib/util.ts', apps), '/apps/my-app', 'a module deeper in the app')
  t.equal(inPlaceFolder('my-app/package.json', apps), '/apps/my-app', "the app's package.json (the service restarts it when its name or version changed)")
  t.equal(inPlaceFolder('my-app/lib/public/x.js', apps), '/apps/my-app', 'a folder named public deeper in the app')
  t.equal(inPlaceFolder('index.js', linkedApp), '/apps/linked', 'a linked app: named by its link, as the service loaded it')
  t.equal(inPlaceFolder('lib/index.js', { dir: '/elsewhere/my-app', publicAt: 0 }), '/elsewhere/my-app', 'a linked app without a shown path: its folder')
  t.equal(inPlaceFolder('new-app', apps), undefined, 'a new app folder (or one gone): a restart')
  t.equal(inPlaceFolder('my-app/public', apps), undefined, 'a public/ folder appearing or going (whether an app has a UI is decided at start)')
  t.equal(inPlaceFolder('my-app/public/.service-external-resources.json', apps), undefined, 'the CSP source, read at start')
  t.equal(inPlaceFolder('public/.service-external-resources.json', linkedApp), undefined, "a linked app's CSP source")
  t.equal(inPlaceFolder('routes/aktor.ts', { dir: '/src', service: true }), undefined, 'src/: a restart')
  t.equal(inPlaceFolder('apps', { dir: '/work', only: 'apps' }), undefined, 'the apps folder appearing or going')
})

t.test('changes not yet reloaded for merge: the app folders of both, or a restart when either needs one', async (t) => {
  const inPlace = (file: string, folder: string, seenAt: number): Change => ({ file, seenAt, service: false, inPlace: [{ folder, file }] })
  const a1 = inPlace('apps/a/index.js', '/apps/a', 1)
  const b = inPlace('apps/b/index.js', '/apps/b', 2)
  const a2 = inPlace('apps/a/lib.js', '/apps/a', 3)
  t.equal(mergeChanges(undefined, a1), a1, 'nothing pending: the change itself')
  t.same(mergeChanges(mergeChanges(a1, b), a2), {
    file: 'apps/a/lib.js', seenAt: 3, service: false, inPlace: [{ folder: '/apps/a', file: 'apps/a/lib.js' }, { folder: '/apps/b', file: 'apps/b/index.js' }]
  }, 'each folder once, named by its last change; the change named by the last')
  const restart: Change = { file: 'apps/new', seenAt: 4, service: false, inPlace: undefined }
  t.same(mergeChanges(a1, restart), restart, 'a restart after an app change: a restart')
  t.same(mergeChanges(restart, a2), { ...a2, inPlace: undefined }, 'an app change after a restart not yet done: still a restart')
  t.equal(mergeChanges({ ...restart, service: true }, a2).service, true, 'a change of src/ is kept: the processes started ahead are stale')
})

t.test('every save is one change, named by the file saved, including saves that replace the file', async (t) => {
  const dir = await tempDir(t, 'reaktor-watch-')
  await fs.mkdir(path.join(dir, 'my-app', 'public'), { recursive: true })
  const file = path.join(dir, 'my-app', 'index.js')
  await fs.writeFile(file, 'v0')
  const changes: Change[] = []
  const watcher = watchChanges([{ dir, publicAt: 1 }], { debounceMs: 50, onChange: (change) => { changes.push(change) }, onError: (err) => { t.error(err) } })
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
    t.same(changes[n - 1].inPlace, [{ folder: path.join(dir, 'my-app'), file: changes[n - 1].file }], `save ${n} reloads its app folder in place`)
  }

  await fs.mkdir(path.join(dir, 'my-app', 'lib'))
  await waitFor(() => changes.length === 7, { what: 'the new folder to be seen' })
  t.same(changes[6].inPlace?.map((change) => change.folder), [path.join(dir, 'my-app')], 'a folder made in an app: the app reloads in place')
  await fs.writeFile(path.join(dir, 'my-app', 'lib', 'util.js'), 'x')
  await waitFor(() => changes.length === 8, { what: 'a file in the new folder to be seen' })
  t.equal(path.basename(changes[7].file), 'util.js', 'a folder made after the start is watched too')

  // A UI file alone, then a module: only the module makes a change. (On a busy machine the events
  // of the write above may still come in a batch of their own: counted from here, by name.)
  const before = changes.length
  await fs.writeFile(path.join(dir, 'my-app', 'public', 'index.html'), '<p>')
  await fs.writeFile(file, 'v7')
  await waitFor(() => changes.slice(before).some((change) => path.resolve(change.file) === file), { what: 'the module save' })
  t.notOk(changes.slice(before).some((change) => path.resolve(change.file).includes(`${path.sep}public${path.sep}`)), 'the public/ file makes no change')
})

t.test('the folders watched follow the apps folder: removed and made again, and app folders linked in and out', async (t) => {
  const work = await tempDir(t, 'reaktor-watch-')
  const apps = path.join(work, 'apps')
  const elsewhere = path.join(work, 'elsewhere', 'linked-app')
  await fs.mkdir(elsewhere, { recursive: true })
  const changes: Change[] = []
  const fromParent: WatchedFolder = { dir: work, only: 'apps' }
  const watcher = watchChanges([fromParent], { debounceMs: 50, onChange: (change) => { changes.push(change) }, onError: (err) => { t.error(err) } })
  t.teardown(() => { watcher.close() })
  /** Waits for a change naming `file` (relative to `work`) after the `from` first ones, and says whether it is the first change since. */
  const seen = async (file: string, from: number, what: string): Promise<boolean> => {
    const named = (change: Change): string => path.relative(work, path.resolve(change.file))
    await waitFor(() => changes.slice(from).some((change) => named(change) === file), { what })
    return named(changes[from]) === file
  }

  let from = changes.length
  await fs.mkdir(apps)
  t.ok(await seen('apps', from, 'the apps folder to be seen appearing'), 'an apps folder made after the start is seen from its parent')
  watcher.update([fromParent, { dir: apps, publicAt: 1 }])
  from = changes.length
  await fs.mkdir(path.join(apps, 'my-app'))
  await seen(path.join('apps', 'my-app'), from, 'a new app folder')
  t.equal(changes.at(-1)?.inPlace, undefined, 'a new app folder restarts the service')
  from = changes.length
  await fs.writeFile(path.join(apps, 'my-app', 'index.js'), 'v1')
  await seen(path.join('apps', 'my-app', 'index.js'), from, 'a save in the new apps folder')

  from = changes.length
  await fs.rm(apps, { recursive: true })
  // Named by a file removed with it: the burst has no file left to name it by.
  await waitFor(() => changes.length > from, { what: 'the apps folder to be seen going' })
  from = changes.length
  await fs.mkdir(path.join(apps, 'my-app'), { recursive: true })
  await seen('apps', from, 'the apps folder to be seen made again')
  // The same folders asked for: the apps folder is another one on disk now, and is watched anew.
  watcher.update([fromParent, { dir: apps, publicAt: 1 }])
  from = changes.length
  await fs.writeFile(path.join(apps, 'my-app', 'index.js'), 'v2')
  await seen(path.join('apps', 'my-app', 'index.js'), from, 'a save in the apps folder made again')
  t.pass('a save in the apps folder made again is seen')

  const link = path.join(apps, 'linked-app')
  from = changes.length
  await fs.symlink(elsewhere, link)
  t.ok(await seen(path.join('apps', 'linked-app'), from, 'the link to be seen'), 'a new entry of the apps folder')
  const linked: WatchedFolder = { dir: elsewhere, shownAs: link, publicAt: 0 }
  watcher.update([fromParent, { dir: apps, publicAt: 1 }, linked])
  from = changes.length
  await fs.writeFile(path.join(elsewhere, 'index.js'), 'v1')
  t.ok(await seen(path.join('apps', 'linked-app', 'index.js'), from, 'a save in the linked app folder'), 'a save in a linked app folder, named by its link')
  t.same(changes.at(-1)?.inPlace?.map((change) => change.folder), [link], 'and reloaded in place as the folder the service loaded: the link')

  from = changes.length
  await fs.rm(link)
  await waitFor(() => changes.length > from, { what: 'the link to be seen going' })
  watcher.update([fromParent, { dir: apps, publicAt: 1 }])
  // In one burst with a save in the apps folder: a change of the unlinked folder would name the burst.
  from = changes.length
  await fs.writeFile(path.join(elsewhere, 'index.js'), 'v2')
  await fs.writeFile(path.join(apps, 'my-app', 'index.js'), 'v3')
  t.ok(await seen(path.join('apps', 'my-app', 'index.js'), from, 'the save in the apps folder'), 'a folder no longer linked is no longer watched')
})

t.test('a folder that cannot be watched is reported, with the fix when the limit of watches is reached', async (t) => {
  const dir = await tempDir(t, 'reaktor-watch-')
  const watch = fsSync.watch
  // As inotify answers once fs.inotify.max_user_watches are in use.
  fsSync.watch = (() => { throw Object.assign(new Error('ENOSPC: System limit for number of file watchers reached'), { code: 'ENOSPC' }) }) as typeof fsSync.watch
  const errors: Array<{ code: string | undefined, dir: string }> = []
  try {
    watchChanges([{ dir }], { debounceMs: 50, onChange: () => {}, onError: (err, at) => { errors.push({ code: err.code, dir: at }) } }).close()
    watchChanges([{ dir: path.join(dir, 'gone') }], { debounceMs: 50, onChange: () => {}, onError: (err, at) => { errors.push({ code: err.code, dir: at }) } }).close()
  } finally {
    fsSync.watch = watch
  }
  t.same(errors, [{ code: 'ENOSPC', dir }, { code: 'ENOSPC', dir: path.join(dir, 'gone') }], 'the error and the folder are passed on, not swallowed')
  const gone = watchChanges([{ dir: path.join(dir, 'gone') }], { debounceMs: 50, onChange: () => {}, onError: (err) => { t.fail(`a folder not there is no error: ${err.code}`) } })
  gone.close()
  const message = watchFailure(Object.assign(new Error('ENOSPC'), { code: 'ENOSPC' }), dir)
  t.match(message, /limit of file watches is reached \(ENOSPC\)/)
  t.match(message, /sudo sysctl fs\.inotify\.max_user_watches=\d+/, 'with the fix')
})
