import t from 'tap'
import { chooseEncoding, etagMatches, FileCache, prepareFile, type CachedFile } from '../../src/app-ui/files.js'
import { helperInsertionOffset } from '../../src/app-ui/helper-script.js'
import { hasDotSegment, parseAppUiUrl } from '../../src/app-ui/url.js'

function entry (bytes: number): CachedFile {
  return { contentType: 'text/plain', identity: { body: Buffer.alloc(bytes), etag: '"x"' }, bytes }
}

t.test('FileCache: bounded by bytes, least recently used evicted, one load per key', async (t) => {
  const cache = new FileCache(100, 60)
  t.ok(cache.accepts(60))
  t.notOk(cache.accepts(61), 'files above the per-file limit are streamed')
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

  const huge = new FileCache(100, 1000)
  await huge.get('h', load(500))
  t.equal(huge.size, 0, 'an entry larger than the whole cache is not kept')

  await t.rejects(cache.get('fails', async () => { throw new Error('EIO') }))
  await cache.get('fails', load(1))
  t.equal(loads, 7, 'a failed load is not cached')
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
})
