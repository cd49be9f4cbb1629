import { randomBytes } from 'node:crypto'
import nodeFs from 'node:fs'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import t, { type Test } from 'tap'
import { FileCache } from '../../src/app-ui/file-cache.js'
import { FolderWatcher } from '../../src/app-ui/folder-watcher.js'
import { chooseEncoding, etagMatches } from '../../src/app-ui/negotiation.js'
import { prepareFile, preparedBytesBound, type CachedFile } from '../../src/app-ui/prepared-file.js'
import { PublicFolder } from '../../src/app-ui/safe-path.js'
import { cacheKey, Site } from '../../src/app-ui/site.js'
import { helperInsertionOffset } from '../../src/app-ui/helper-script.js'
import { hasDotSegment, parseAppUiUrl } from '../../src/app-ui/url.js'
import { memoryLogger } from '../helpers/log.js'
import { waitFor } from '../helpers/timing.js'

function entry (bytes: number): CachedFile {
  return { contentType: 'text/plain', identity: { body: Buffer.alloc(bytes), etag: '"x"' }, bytes }
}

t.test('FileCache: bounded by bytes, least recently used evicted, one load per key', async (t) => {
  const cache = new FileCache(100)
  t.ok(cache.holds(100))
  t.notOk(cache.holds(101), 'an entry larger than the whole cache is never kept')
  let loads = 0
  const load = (bytes: number) => async () => { loads++; return entry(bytes) }
  await cache.get('a', load(40))
  await cache.get('b', load(40))
  await cache.get('a', load(40)) // a is now the most recent
  t.equal(loads, 2, 'hits do not load')
  await cache.get('c', load(40)) // over 100: evicts b (least recent)
  t.equal(cache.bytes, 80)
  t.equal(cache.size, 2)
  await cache.get('a', load(40))
  t.equal(loads, 3, 'a survived')
  await cache.get('b', load(40))
  t.equal(loads, 4, 'b was evicted and loads again')
  t.ok(cache.bytes <= cache.maxBytes)

  const [x, y] = await Promise.all([cache.get('same', load(10)), cache.get('same', load(10))])
  t.equal(x, y, 'concurrent first requests share one load')
  t.equal(loads, 5)

  const huge = new FileCache(100)
  await huge.get('h', load(500))
  t.equal(huge.size, 0, 'an entry larger than the whole cache is not kept')

  await t.rejects(cache.get('fails', async () => { throw new Error('EIO') }))
  await cache.get('fails', load(1))
  t.equal(loads, 7, 'a failed load is not cached')
})

t.test('FileCache: a load under way when its key is invalidated is returned but never kept', async (t) => {
  const cache = new FileCache(1000)
  const gate = <T>(): { promise: Promise<T>, open: (value: T) => void } => {
    let open!: (value: T) => void
    return { promise: new Promise<T>((resolve) => { open = resolve }), open }
  }
  const before = entry(10)
  const read = gate<CachedFile>()
  const stale = cache.get('/pub/app.js\0v1', async () => await read.promise)
  cache.invalidateBelow(['/pub'])
  // A request after the change reads again rather than joining the read from before it.
  const after = entry(20)
  const reread = gate<CachedFile>()
  let loads = 0
  const fresh = cache.get('/pub/app.js\0v1', async () => { loads++; return await reread.promise })
  const joined = cache.get('/pub/app.js\0v1', async () => { loads++; return entry(30) })
  read.open(before)
  t.equal(await stale, before, 'whoever asked before the change gets what was read')
  t.equal(cache.peek('/pub/app.js\0v1'), undefined, 'but it is not kept')
  t.equal(cache.bytes, 0)
  reread.open(after)
  t.equal(await fresh, after)
  t.equal(await joined, after, 'requests after the change share the new read')
  t.equal(loads, 1)
  t.equal(cache.peek('/pub/app.js\0v1'), after, 'the read begun after the change is kept')
  t.equal(cache.bytes, 20)

  await cache.get('/other/x.js\0v1', async () => entry(5))
  cache.invalidateBelow(['/pub'])
  t.equal(cache.peek('/pub/app.js\0v1'), undefined, 'invalidated')
  t.equal(cache.size, 1, 'entries it does not match stay')
  t.equal(cache.bytes, 5, 'and the memory count follows')
})

t.test('PublicFolder: forget drops memoised answers and keeps a check under way from being memoised', async (t) => {
  const dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'safe-path-')))
  t.teardown(async () => await fs.rm(dir, { recursive: true, force: true }))
  await fs.writeFile(path.join(dir, 'a.js'), 'one')
  const folder = await PublicFolder.open(dir)
  const first = await folder.resolve(['a.js'], false)
  t.equal(await folder.resolve(['a.js'], false), first, 'memoised')
  await fs.writeFile(path.join(dir, 'a.js'), 'three')
  folder.forget()
  t.match(await folder.resolve(['a.js'], false), { kind: 'file', size: 5 }, 'checked again after forget')

  folder.forget()
  const underWay = folder.resolve(['a.js'], false)
  folder.forget()
  const checked = await underWay
  t.not(await folder.resolve(['a.js'], false), checked, 'an answer checked across a forget is not memoised')

  await folder.resolve(['a.js'], false)
  folder.stopMemoising()
  const unmemoised = await folder.resolve(['a.js'], false)
  t.not(await folder.resolve(['a.js'], false), unmemoised, 'nothing is memoised while memoising is off')
})

t.test('Site: when public/ cannot be watched, one warning with the fix, and every request is checked on disk', async (t) => {
  const dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'site-')))
  t.teardown(async () => await fs.rm(dir, { recursive: true, force: true }))
  await fs.writeFile(path.join(dir, 'a.js'), 'one')
  // What fs.watch throws once the inotify watches of the user are used up.
  const noWatches = Object.assign(new Error('ENOSPC: System limit for number of file watchers reached'), { code: 'ENOSPC' })
  replaceWatch(t, () => { throw noWatches })
  const log = memoryLogger()
  const cache = new FileCache(1000)
  const site = await Site.open(dir, 'demo@1.0.0', cache, log)
  t.teardown(async () => { await site.close() })
  const folder = site.folder
  t.equal(site.watching, false)
  const warnings = log.lines.filter((l) => l.level === 'warn' && l.msg?.includes('cannot be watched'))
  t.equal(warnings.length, 1, 'one warning')
  t.match(warnings[0].msg, /^app demo@1\.0\.0: .*max_user_watches/, 'naming the app and the fix')

  const first = await folder.resolve(['a.js'], false)
  await fs.writeFile(path.join(dir, 'a.js'), 'three')
  const second = await folder.resolve(['a.js'], false)
  t.match(second, { kind: 'file', size: 5 }, 'resolved on disk again')
  if (first.kind !== 'file' || second.kind !== 'file') throw new Error('a.js is a file')
  t.not(cacheKey(second), cacheKey(first), 'a new content of a file has its own cache key')
})

t.test('prepareFile: variants only for text, only when smaller', async (t) => {
  const js = await prepareFile('a.js', Buffer.from('let x = 1;\n'.repeat(100)))
  t.ok(js.br !== undefined && js.gzip !== undefined)
  t.equal(js.bytes, js.identity.body.length + (js.br?.body.length ?? 0) + (js.gzip?.body.length ?? 0))
  const png = await prepareFile('a.png', Buffer.alloc(5000))
  t.equal(png.br, undefined)
  t.equal(png.gzip, undefined)
  const tiny = await prepareFile('a.css', Buffer.from('a{}'))
  t.equal(tiny.br, undefined, 'tiny files are not worth it')

  // The bound holds before the file is read: body (helper included) and two smaller variants.
  for (const [file, raw] of [['a.js', js.identity.body], ['a.png', png.identity.body], ['a.css', Buffer.from('a{}')], ['p.html', Buffer.from('<p>' + 'x'.repeat(400))], ['n.html', Buffer.from(randomBytes(3000).toString('base64'))]] as const) {
    const prepared = await prepareFile(file, raw)
    t.ok(prepared.bytes <= preparedBytesBound(file, raw.length), `${file}: ${prepared.bytes} <= ${preparedBytesBound(file, raw.length)}`)
  }
  t.equal(preparedBytesBound('a.png', 5000), 5000, 'no variants for types that are not compressed')
})

t.test('chooseEncoding and etagMatches', async (t) => {
  const both = { br: 1, gzip: 1 }
  t.equal(chooseEncoding(undefined, both), undefined)
  t.equal(chooseEncoding('', both), undefined)
  t.equal(chooseEncoding('gzip, deflate, br, zstd', both), 'br')
  t.equal(chooseEncoding('gzip', both), 'gzip')
  t.equal(chooseEncoding('x-gzip', both), 'gzip')
  t.equal(chooseEncoding('br;q=0.1, gzip;q=0.9', both), 'gzip')
  t.equal(chooseEncoding('br;q=0, gzip;q=0', both), undefined)
  t.equal(chooseEncoding('*', both), 'br')
  t.equal(chooseEncoding('*;q=0', both), undefined)
  t.equal(chooseEncoding('br', { gzip: 1 }), undefined, 'only variants that exist')
  t.equal(chooseEncoding('identity', both), undefined)

  t.ok(etagMatches('"a"', '"a"'))
  t.ok(etagMatches('W/"a"', '"a"'))
  t.ok(etagMatches('"b", "a"', '"a"'))
  t.ok(etagMatches('*', '"a"'))
  t.notOk(etagMatches('"b"', '"a"'))
  t.notOk(etagMatches(undefined, '"a"'))
})

t.test('hasDotSegment and parseAppUiUrl', async (t) => {
  for (const s of ['.env', 'a/.b', '..', '%2e%2e', '%252e', 'a\\..', '%2E', '%5c..', 'x%2f.y', '%25252e']) t.ok(hasDotSegment(s), s)
  for (const s of ['a.b', 'index.html', 'a..b', '%2', 'x%41']) t.notOk(hasDotSegment(s), s)

  const prefix = ['app-ui']
  t.match(parseAppUiUrl('/app-ui/demo@1.0.0/a/b.js?x=1', prefix), { kind: 'app', name: 'demo', version: '1.0.0', segments: ['a', 'b.js'], trailingSlash: false, dotSegment: false, query: 'x=1' })
  t.match(parseAppUiUrl('/app-ui/@s/n@2/', prefix), { kind: 'app', name: '@s/n', version: '2', segments: [], trailingSlash: true })
  t.match(parseAppUiUrl('/app-ui/demo@1', prefix), { kind: 'app', segments: null })
  t.match(parseAppUiUrl('/app-ui/demo@1?q', prefix), { kind: 'app', segments: null, query: 'q' })
  t.match(parseAppUiUrl('/app-ui/demo@1/a%5cb', prefix), { segments: ['a', 'b'] })
  t.match(parseAppUiUrl('/app-ui/demo@1/?a=%0d%0aSet-Cookie:x', prefix), { query: 'a=%0d%0aSet-Cookie:x' })
  t.match(parseAppUiUrl('/app-ui/demo@1/?a=\r\nx y', prefix), { query: 'a=%0D%0Ax%20y' }, 'a raw CR/LF/space never reaches a header')
  t.match(parseAppUiUrl('http://evil.example/app-ui/demo@1/', prefix), { kind: 'app', name: 'demo' }, 'absolute-form targets: the path only')
  t.match(parseAppUiUrl('/other/demo@1/', prefix), { kind: 'none' })
  t.match(parseAppUiUrl('/app-ui/demo/', prefix), { kind: 'none' })
  t.match(parseAppUiUrl('/app-ui/demo@1/%e0%80', prefix), { kind: 'bad' })
  t.match(parseAppUiUrl('/app-ui/demo@1/a%00', prefix), { kind: 'bad' })
})

t.test('helperInsertionOffset', async (t) => {
  t.equal(helperInsertionOffset('<head>'), 6)
  t.equal(helperInsertionOffset('<!doctype html><head>x'), 21)
  t.equal(helperInsertionOffset('<html><body>'), 6)
  t.equal(helperInsertionOffset('<!-- unterminated'), 0)
  t.equal(helperInsertionOffset('<headline>'), 0)
  t.equal(helperInsertionOffset('  <HEAD >'), 9)
  // Read as the browser reads it: '>' inside a quoted attribute value does not end the tag, and
  // '<!-->' is a whole comment (not the start of one running to the next '-->').
  t.equal(helperInsertionOffset('<html lang="en" data-x="a>b"><body>'), 29)
  t.equal(helperInsertionOffset('<HEAD data-x=">">x'), 17)
  t.equal(helperInsertionOffset("<head data-x='<head>'>"), 22)
  t.equal(helperInsertionOffset('<!DOCTYPE html><!--><script src="a.js"></script><!-- x -->'), 20)
  t.equal(helperInsertionOffset('<!DOCTYPE html>\r\n<html>\r\n<head>'), 31, 'CR LF counted as two bytes')
  t.equal(helperInsertionOffset('\u00ef\u00bb\u00bf<!doctype html><head>'), 24, 'after a UTF-8 BOM')
  t.equal(helperInsertionOffset('<!doctype html>\n<!-- a --> text'), 26, 'before the first text')
  t.equal(helperInsertionOffset('<!doctype html><html><head'), 21, 'a cut tag: after the last whole one')
})

t.test('PublicFolder: only real paths inside public/, never a dot file', async (t) => {
  const dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'safe-path-')))
  t.teardown(async () => await fs.rm(dir, { recursive: true, force: true }))
  const pub = path.join(dir, 'public')
  const write = async (file: string, text = 'x'): Promise<void> => {
    await fs.mkdir(path.dirname(path.join(dir, file)), { recursive: true })
    await fs.writeFile(path.join(dir, file), text)
  }
  for (const file of ['public/index.html', 'public/app.js', 'public/.env', 'public/sub/.hidden', 'public/.git/config', 'public/empty/keep.txt', 'public-old/x.js', 'secret.txt']) await write(file)
  const link = async (target: string, name: string): Promise<void> => await fs.symlink(target, path.join(pub, name))
  await link(path.join(dir, 'secret.txt'), 'out.txt')
  await link('../secret.txt', 'relative-out.txt')
  await link(path.join(dir, 'public-old', 'x.js'), 'sibling.js')
  await link(path.join(pub, '.env'), 'env-link')
  await link(path.join(pub, '.git'), 'git-link')
  await link(path.join(pub, 'app.js'), 'alias.js')
  await link('loop', 'loop')
  await fs.mkdir(path.join(pub, 'linked-index'))
  await fs.symlink(path.join(dir, 'secret.txt'), path.join(pub, 'linked-index', 'index.html'))
  await fs.symlink(pub, path.join(dir, 'public-link'))

  await t.rejects(PublicFolder.open(path.join(dir, 'missing')), 'a missing public/ is refused')
  await t.rejects(PublicFolder.open(path.join(dir, 'secret.txt')), { message: 'not a folder' })
  const folder = await PublicFolder.open(path.join(dir, 'public-link'))
  t.equal(folder.root, pub, 'the root is the real path')

  const kind = async (segments: string[], trailingSlash = false): Promise<string> => (await folder.resolve(segments, trailingSlash)).kind
  t.match(await folder.resolve(['app.js'], false), { kind: 'file', realPath: path.join(pub, 'app.js'), size: 1 })
  t.match(await folder.resolve([], true), { kind: 'file', realPath: path.join(pub, 'index.html') }, 'a folder with its slash: index.html')
  t.equal(await kind([]), 'folder', 'a folder without its slash: redirect')
  t.equal(await kind(['empty'], true), 'missing', 'a folder without index.html')
  t.equal(await kind(['app.js'], true), 'missing', 'a file with a trailing slash')
  t.equal(await kind(['nothing.js']), 'missing')
  t.equal(await kind(['app.js', 'x']), 'missing', 'a file used as a folder')
  t.match(await folder.resolve(['alias.js'], false), { kind: 'file', realPath: path.join(pub, 'app.js') }, 'a link inside public/ is followed, to its real path')
  t.match(await folder.resolve(['..', 'public', 'app.js'], false), { kind: 'file', realPath: path.join(pub, 'app.js') }, '.. that stays inside')

  for (const segments of [
    ['..', 'secret.txt'], ['..', '..', '..', '..', 'etc', 'passwd'], ['..', 'public-old', 'x.js'], ['..'],
    ['.env'], ['sub', '.hidden'], ['.git', 'config'], ['.git'],
    ['out.txt'], ['relative-out.txt'], ['sibling.js'], ['env-link'], ['git-link', 'config'], ['loop']
  ]) t.equal(await kind(segments), 'forbidden', segments.join('/'))
  t.equal(await kind(['linked-index'], true), 'forbidden', 'an index.html linked out of public/')

  const first = await folder.resolve(['app.js'], false)
  t.equal(await folder.resolve(['app.js'], false), first, 'positive answers are memoised')
})

t.test('FileCache: a file\'s entries go by path alone, its subtree in one pass', async (t) => {
  const cache = new FileCache(1000)
  for (const key of ['/pub/a.js\0v1', '/pub/a.js\0v2', '/pub/a.jsx\0v1', '/pub/sub/b.js\0v1', '/pub-old/c.js\0v1']) await cache.get(key, async () => entry(1))
  cache.invalidateFile('/pub/a.js')
  t.equal(cache.peek('/pub/a.js\0v1'), undefined, 'every content of the file')
  t.equal(cache.peek('/pub/a.js\0v2'), undefined)
  t.equal(cache.size, 3, 'not a file whose name merely starts with it')
  cache.invalidateBelow(['/pub/sub', '/nowhere'])
  t.equal(cache.peek('/pub/sub/b.js\0v1'), undefined, 'below a folder')
  cache.invalidateBelow(['/pub'])
  t.ok(cache.peek('/pub-old/c.js\0v1'), 'not a sibling whose name starts with the folder')
  t.equal(cache.size, 1)
  t.equal(cache.bytes, 1)
})

t.test('cacheKey: a copy keeping size and mtime (cp -p) has a key of its own', async (t) => {
  const dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'cache-key-')))
  t.teardown(async () => await fs.rm(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'version.js')
  // Whole seconds: times put back exactly as they were.
  const times = 1_700_000_000
  await fs.writeFile(file, 'window.v="1.2.3"')
  await fs.utimes(file, times, times)
  const folder = await PublicFolder.open(dir)
  const first = await folder.resolve(['version.js'], false)
  // Another content of the same size, written in place with the old times put back.
  await waitFor(async () => {
    await fs.writeFile(file, 'window.v="1.2.4"')
    await fs.utimes(file, times, times)
    folder.forget()
    const second = await folder.resolve(['version.js'], false)
    return second.kind === 'file' && first.kind === 'file' && second.ctimeMs !== first.ctimeMs ? second : undefined
  }, { what: 'a new change time' })
  const second = await folder.resolve(['version.js'], false)
  if (first.kind !== 'file' || second.kind !== 'file') throw new Error('version.js is a file')
  t.equal(second.size, first.size)
  t.equal(second.mtimeMs, first.mtimeMs)
  t.not(cacheKey(second), cacheKey(first))
})

/**
 * Node's `fs.watch`, as src/app-ui reads it (`fs.watch` of the default export: the module object
 * every importer shares), replaced until the test ends.
 */
function replaceWatch (t: Test, watch: (...args: unknown[]) => nodeFs.FSWatcher): void {
  const shared = nodeFs as { watch: unknown }
  const original = shared.watch
  shared.watch = watch
  t.teardown(() => { shared.watch = original })
}

/** `fs.watch` runs `before(path)` first and then watches for real. */
function watchAfter (t: Test, before: (folder: string) => void): void {
  const original = nodeFs.watch as (...args: unknown[]) => nodeFs.FSWatcher
  replaceWatch(t, (folder, ...rest) => {
    before(folder as string)
    return original(folder, ...rest)
  })
}

t.test('FolderWatcher: a folder it may not read is not watched, and the rest still is', async (t) => {
  const root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'watcher-')))
  t.teardown(async () => await fs.rm(root, { recursive: true, force: true }))
  let allowed = false
  watchAfter(t, (folder) => {
    if (path.basename(folder) === 'private' && !allowed) throw Object.assign(new Error(`EACCES: permission denied, watch '${folder}'`), { code: 'EACCES' })
  })
  const failures: Error[] = []
  const changes: string[] = []
  const watcher = new FolderWatcher(root, { change: (changed) => { changes.push(changed) }, failure: (err) => { failures.push(err) } })
  t.teardown(() => { watcher.close() })
  watcher.start()
  await fs.mkdir(path.join(root, 'private'))
  await waitFor(() => changes.includes(path.join(root, 'private')), { what: 'the new folder reported' })
  t.same(failures, [], 'no failure')
  t.equal(watcher.sees(path.join(root, 'private', 'x.js')), false, 'changes below it are not seen')
  t.equal(watcher.sees(path.join(root, 'x.js')), true, 'the rest is')

  allowed = true
  await fs.chmod(path.join(root, 'private'), 0o755)
  await waitFor(() => watcher.sees(path.join(root, 'private', 'x.js')), { what: 'watched once it may be read' })
  await fs.writeFile(path.join(root, 'private', 'x.js'), 'x')
  await waitFor(() => changes.includes(path.join(root, 'private', 'x.js')), { what: 'a change below it' })
})

t.test('FolderWatcher: a folder swapped for a link while its watch is made is not followed out', async (t) => {
  const root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'watcher-')))
  const outside = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'outside-')))
  t.teardown(async () => {
    await fs.rm(root, { recursive: true, force: true })
    await fs.rm(outside, { recursive: true, force: true })
  })
  for (const folder of ['a', 'b', 'a/c']) await fs.mkdir(path.join(outside, folder))
  await fs.mkdir(path.join(root, 'assets'))
  const watched: string[] = []
  watchAfter(t, (folder) => {
    if (folder === path.join(root, 'assets') && !watched.includes(folder)) {
      nodeFs.rmdirSync(folder)
      nodeFs.symlinkSync(outside, folder)
    }
    watched.push(folder)
  })
  const failures: Error[] = []
  const watcher = new FolderWatcher(root, { change: () => {}, failure: (err) => { failures.push(err) } })
  t.teardown(() => { watcher.close() })
  watcher.start()
  t.same(watched, [root, path.join(root, 'assets')], 'nothing below the link is watched')
  t.equal(watcher.size, 1, 'only the root stays watched')
  t.same(failures, [])
})

t.test('FolderWatcher: says what a change touched', async (t) => {
  const root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'watcher-')))
  t.teardown(async () => await fs.rm(root, { recursive: true, force: true }))
  await fs.writeFile(path.join(root, 'a.js'), 'one')
  await fs.writeFile(path.join(root, 'linked.js'), 'one')
  await fs.link(path.join(root, 'linked.js'), path.join(root, 'other-name.js'))
  const { FolderWatcher } = await import('../../src/app-ui/folder-watcher.js')
  const seen: string[] = []
  const watcher = new FolderWatcher(root, { change: (changed, kind) => { seen.push(`${path.relative(root, changed)} ${kind}`) }, failure: () => {} })
  t.teardown(() => { watcher.close() })
  watcher.start()
  const reported = async (what: string): Promise<void> => { await waitFor(() => seen.includes(what), { what }) }

  await fs.appendFile(path.join(root, 'a.js'), 'more')
  await reported('a.js content')
  await fs.writeFile(path.join(root, 'b.js.tmp'), 'two')
  await fs.rename(path.join(root, 'b.js.tmp'), path.join(root, 'a.js'))
  await reported('a.js entry')
  await fs.mkdir(path.join(root, 'sub'))
  await reported('sub tree')
  await fs.rm(path.join(root, 'sub'), { recursive: true })
  await waitFor(() => seen.filter((s) => s === 'sub tree').length >= 2, { what: 'the folder removed' })
  await fs.appendFile(path.join(root, 'linked.js'), 'more')
  await reported('linked.js entry')
  t.notOk(seen.includes('linked.js content'), 'a file with another name is more than new content: the other name is not reported')
  t.equal(watcher.size, 1)
})
