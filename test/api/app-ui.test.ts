import { createHash } from 'node:crypto'
import fs from 'node:fs/promises'
import path from 'node:path'
import zlib from 'node:zlib'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { HELPER_SCRIPT, HELPER_SCRIPT_HASH } from '../../src/app-ui/helper-script.js'
import { build, metric } from '../helpers/app.js'
import type { TestContext } from '../helpers/test-context.js'
import { SESSION_COOKIE } from '../../src/auth/types.js'
import { browse, rawRequest, writeApp, type Files } from '../helpers/app-ui.js'
import { sessionToken } from '../helpers/auth.js'

const INDEX = '<!DOCTYPE html>\n<html><head><title>Demo</title><script src="app.js"></script></head><body><h1>Demo</h1></body></html>\n'
const APP_JS = `document.title = 'ready';\n${'// a comment that makes the file worth compressing\n'.repeat(40)}`

const FILES: Files = {
  'public/index.html': INDEX,
  'public/app.js': APP_JS,
  'public/style.css': 'body { color: rebeccapurple; }\n'.repeat(30),
  'public/data.json': JSON.stringify({ hello: 'world' }),
  'public/logo.svg': '<svg xmlns="http://www.w3.org/2000/svg"/>',
  'public/logo.png': Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  'public/font.woff2': Buffer.from('wOF2'),
  'public/notes.weird-extension': 'bytes',
  'public/page.htm': '<p>no head here</p><script src="x.js"></script>',
  'public/UPPER.html': '<!doctype html><HTML><HEAD><TITLE>Upper</TITLE><SCRIPT src="a.js"></SCRIPT></HEAD></HTML>',
  'public/sub/index.html': '<html><head></head><body>sub</body></html>',
  'public/sub/deeper/file.txt': 'deep',
  'public/.env': 'SECRET=1',
  'public/.service-external-resources.json': JSON.stringify({ allowedOrigins: ['https://cdn.example.com/lib/x.js'] }),
  'public/.git/config': '[core]',
  'public/sub/.hidden': 'hidden',
  'secret.txt': 'outside public'
}

interface Fixture { app: FastifyInstance, token: string, dir: string, base: string }

async function fixture (t: TestContext, extra: Files = {}, env: Record<string, string> = {}): Promise<Fixture> {
  const def = await writeApp(t, 'demo', '1.0.0', { ...FILES, ...extra })
  const scoped = await writeApp(t, '@acme/widgets', '0.1.0-beta.1', { 'public/index.html': '<html><head></head>widgets</html>' })
  const app = await build(t, { apps: [def, scoped], env })
  return { app, token: await sessionToken(app), dir: def.dir as string, base: '/app-ui/demo@1.0.0' }
}

t.test('routing: app segment checked before any file path', async (t) => {
  const { app, token, base } = await fixture(t)

  const root = await browse(app, `${base}/`, token)
  t.equal(root.statusCode, 200, 'the app root serves index.html')
  t.match(root.headers['content-type'], /^text\/html; charset=utf-8/)
  t.match(root.body, /<h1>Demo<\/h1>/)

  for (const url of ['/app-ui/demo@2.0.0/', '/app-ui/other@1.0.0/', '/app-ui/demo/', '/app-ui/demo@/', '/app-ui/@1.0.0/', '/app-ui/Demo@1.0.0/', '/app-ui/']) {
    const res = await browse(app, url, token)
    t.equal(res.statusCode, 404, `${url} is not an app`)
  }
  t.equal((await browse(app, `${base}/missing.js`, token)).statusCode, 404, 'missing file')
  t.equal((await browse(app, `${base}/sub/nothing/`, token)).statusCode, 404, 'missing folder')
  t.equal((await browse(app, `${base}/app.js/`, token)).statusCode, 404, 'a file is no folder')

  const scoped = await browse(app, '/app-ui/@acme/widgets@0.1.0-beta.1/', token)
  t.equal(scoped.statusCode, 200, 'scoped names are served at /app-ui/@scope/name@version/')
  t.match(scoped.body, /widgets/)
  const scopedEncoded = await browse(app, '/app-ui/%40acme/widgets%400.1.0-beta.1/', token)
  t.equal(scopedEncoded.statusCode, 200, 'an encoded @ is the same app')
  t.equal((await browse(app, '/app-ui/@acme/demo@1.0.0/', token)).statusCode, 404, 'scope is part of the name')
  t.equal((await browse(app, '/app-ui/@acme%2Fwidgets@0.1.0-beta.1/', token)).statusCode, 404, 'an encoded slash does not split the scope')
})

t.test('routing: the app root without slash redirects to the canonical path, query kept', async (t) => {
  const { app, token, base } = await fixture(t)
  const plain = await browse(app, base, token)
  t.equal(plain.statusCode, 301)
  t.equal(plain.headers.location, '/app-ui/demo@1.0.0/')

  const withQuery = await browse(app, `${base}?tab=2&x=%2F`, token)
  t.equal(withQuery.headers.location, '/app-ui/demo@1.0.0/?tab=2&x=%2F')

  const scoped = await browse(app, '/app-ui/%40acme/widgets@0.1.0-beta.1?a=1', token)
  t.equal(scoped.statusCode, 301)
  t.equal(scoped.headers.location, '/app-ui/@acme/widgets@0.1.0-beta.1/?a=1', 'rebuilt from the checked name, not echoed')

  const anonymous = await browse(app, base, undefined)
  t.equal(anonymous.headers.location, '/app-ui/demo@1.0.0/', 'the slash redirect needs no session (it reveals nothing)')

  // A naive `req.url + '/'` would send the browser to //app-ui/x@1/, another host.
  for (const url of ['//app-ui/demo@1.0.0', '//evil.example/app-ui/demo@1.0.0', '/app-ui//evil.example@1', '/app-ui/demo@1.0.0?x=//evil.example']) {
    const res = await browse(app, url, token)
    const location = res.headers.location
    if (typeof location === 'string') {
      t.ok(location.startsWith('/app-ui/') && !location.startsWith('//'), `${url} → ${location} stays on this site`)
    } else {
      t.equal(res.statusCode, 404, `${url} is not found`)
    }
  }

  const sub = await browse(app, `${base}/sub?q=1`, token)
  t.equal(sub.statusCode, 301, 'a folder without slash redirects')
  t.equal(sub.headers.location, '/app-ui/demo@1.0.0/sub/?q=1')
  const subDone = await browse(app, `${base}/sub/`, token)
  t.equal(subDone.statusCode, 200)
  t.match(subDone.body, /sub/)
  const deeper = await browse(app, `${base}/sub/deeper`, token)
  t.equal(deeper.headers.location, '/app-ui/demo@1.0.0/sub/deeper/')
  t.equal((await browse(app, `${base}/sub/deeper/`, token)).statusCode, 404, 'a folder without index.html')
})

t.test('files: dot segments are refused after decoding, in every encoding', async (t) => {
  const { app, token, base } = await fixture(t)
  // Over a real socket: inject() would resolve `..` and `%2e` segments before the server saw them.
  const origin = await app.listen({ port: 0, host: '127.0.0.1' })
  const cookie = { cookie: `${SESSION_COOKIE}=${token}` }
  const attacks = [
    '/.env', '/.service-external-resources.json', '/.git/config', '/sub/.hidden', '/.nothing-here',
    '/%2eenv', '/%2Eenv', '/%252eenv', '/%25252eenv', '/%2eservice-external-resources.json',
    '/%2e%2e/secret.txt', '/%2E%2E/secret.txt', '/%252e%252e/secret.txt', '/..%2fsecret.txt', '/..%2Fsecret.txt',
    '/..%5csecret.txt', '/..%5Csecret.txt', '/sub/..%5c..%5csecret.txt', '/%5c..%5csecret.txt', '/sub%2f..%2f..%2fsecret.txt',
    '/../secret.txt', '/sub/../../secret.txt', '/./index.html', '/%2e/index.html', '/..', '/.', '/%2e%2e',
    '/sub/%252e%252e/%252e%252e/secret.txt', '/..\\secret.txt', '/sub\\..\\..\\secret.txt', '/%2e%2e/%2e%2e/%2e%2e/etc/passwd'
  ]
  for (const attack of attacks) {
    const res = await rawRequest(origin, base + attack, cookie)
    t.equal(res.statusCode, 403, `${attack} → 403`)
    t.notMatch(res.body, /SECRET|outside public|\[core\]|hidden|allowedOrigins|root:/, `${attack} leaks nothing`)
  }
  // Whoever asks: dot files answer 403 before the session is even looked at.
  t.equal((await rawRequest(origin, `${base}/.service-external-resources.json`)).statusCode, 403)
  t.equal((await rawRequest(origin, `${base}/%2e%2e/%2e%2e/%2e%2e/etc/passwd`)).statusCode, 403)
  t.equal((await rawRequest(origin, `${base}/%2e%2e/%2e%2e/%2e%2e/etc/passwd`, cookie, 'HEAD')).statusCode, 403)
  // Dot segments in front of the app segment cannot reach another folder either.
  t.equal((await rawRequest(origin, '/app-ui/demo@1.0.0/../demo@1.0.0/secret.txt', cookie)).statusCode, 403)
  const outside = await rawRequest(origin, '/app-ui/../etc/passwd', cookie)
  t.not(outside.statusCode, 200, '/app-ui/../etc/passwd')
  t.notMatch(outside.body, /root:/)

  t.equal((await browse(app, `${base}/%zz`, token)).statusCode, 400, 'malformed encoding')
  t.equal((await browse(app, `${base}/index.html%00.png`, token)).statusCode, 400, 'NUL byte')
  t.equal((await browse(app, `${base}/%252e%252e/secret.txt`, token)).statusCode, 403, 'through inject as well')
})

t.test('files: symbolic links never lead out of public/', async (t) => {
  const { app, token, base, dir } = await fixture(t)
  const pub = path.join(dir, 'public')
  await fs.symlink('/etc/passwd', path.join(pub, 'passwd'))
  await fs.symlink(path.join(dir, 'secret.txt'), path.join(pub, 'secret-link.txt'))
  await fs.symlink('/etc', path.join(pub, 'etc'))
  await fs.symlink(path.join(pub, '.env'), path.join(pub, 'env-link'))
  await fs.symlink(path.join(pub, 'app.js'), path.join(pub, 'alias.js'))
  await fs.symlink(path.join(pub, 'sub'), path.join(pub, 'sub-alias'))

  for (const url of ['/passwd', '/secret-link.txt', '/etc/passwd', '/etc/hostname', '/env-link']) {
    const res = await browse(app, base + url, token)
    t.equal(res.statusCode, 403, `${url} → 403`)
    t.notMatch(res.body, /root:|outside public|SECRET/)
  }
  const inside = await browse(app, `${base}/alias.js`, token)
  t.equal(inside.statusCode, 200, 'a link that stays inside public/ is served')
  t.equal(inside.body, APP_JS)
  t.equal((await browse(app, `${base}/sub-alias/deeper/file.txt`, token)).body, 'deep')
})

t.test('auth: no valid session cookie → login with the way back', async (t) => {
  const { app, token, base } = await fixture(t)
  for (const cookie of [undefined, 'not-a-token', 'A'.repeat(43)]) {
    const res = await browse(app, `${base}/sub/deeper/file.txt?x=1&y=%C3%A9`, cookie)
    t.equal(res.statusCode, 302, `cookie ${cookie ?? 'absent'} → redirect`)
    t.equal(res.headers.location, `/login?redirect=${encodeURIComponent('/app-ui/demo@1.0.0/sub/deeper/file.txt?x=1&y=%C3%A9')}`)
    t.equal(res.headers['cache-control'], 'no-store')
  }
  const root = await browse(app, `${base}/`, undefined)
  t.equal(root.headers.location, '/login?redirect=%2Fapp-ui%2Fdemo%401.0.0%2F')
  t.equal((await browse(app, `${base}/missing`, undefined)).statusCode, 302, 'no file existence check before login')

  const apiToken = await browse(app, `${base}/`, undefined, { 'x-service-token': token })
  t.equal(apiToken.statusCode, 302, 'the UI authenticates by the browser cookie, not the API header')

  await app.sessions.revoke(token)
  t.equal((await browse(app, `${base}/`, token)).statusCode, 302, 'a revoked session no longer opens the app')
})

t.test('files: content types, ETag/304, HEAD', async (t) => {
  const { app, token, base } = await fixture(t)
  const types: Record<string, RegExp> = {
    '/app.js': /^text\/javascript; charset=utf-8$/,
    '/style.css': /^text\/css; charset=utf-8$/,
    '/data.json': /^application\/json; charset=utf-8$/,
    '/logo.svg': /^image\/svg\+xml/,
    '/logo.png': /^image\/png$/,
    '/font.woff2': /^font\/woff2$/,
    '/notes.weird-extension': /^application\/octet-stream$/,
    '/page.htm': /^text\/html; charset=utf-8$/,
    '/sub/deeper/file.txt': /^text\/plain; charset=utf-8$/
  }
  for (const [file, type] of Object.entries(types)) {
    const res = await browse(app, base + file, token)
    t.equal(res.statusCode, 200, file)
    t.match(res.headers['content-type'], type, `${file} content type`)
    t.equal(res.headers['x-content-type-options'], 'nosniff')
  }
  const png = await browse(app, `${base}/logo.png`, token)
  t.same(png.rawPayload, FILES['public/logo.png'], 'binary files arrive byte for byte')

  const first = await browse(app, `${base}/app.js`, token)
  const etag = first.headers.etag as string
  t.match(etag, /^"[A-Za-z0-9_-]+"$/, 'a strong ETag')
  t.equal(first.headers['cache-control'], 'private, no-cache', 'assets are revalidated: they can change while the service runs')
  const again = await browse(app, `${base}/app.js`, token)
  t.equal(again.headers.etag, etag, 'the same ETag every time')
  const notModified = await browse(app, `${base}/app.js`, token, { 'if-none-match': etag })
  t.equal(notModified.statusCode, 304)
  t.equal(notModified.body, '')
  t.equal(notModified.headers.etag, etag)
  t.equal((await browse(app, `${base}/app.js`, token, { 'if-none-match': `"other", W/${etag}` })).statusCode, 304, 'weak comparison, lists')
  t.equal((await browse(app, `${base}/app.js`, token, { 'if-none-match': '"stale"' })).statusCode, 200)
  t.equal((await browse(app, `${base}/app.js`, undefined, { 'if-none-match': etag })).statusCode, 302, 'revalidation still needs the session')

  const page = await browse(app, `${base}/`, token)
  t.equal(page.headers['cache-control'], 'private, no-cache', 'HTML is revalidated on every navigation')
  t.equal((await browse(app, `${base}/`, token, { 'if-none-match': page.headers.etag as string })).statusCode, 304, 'HTML is cacheable: it carries no token')

  const head = await browse(app, `${base}/app.js`, token, {}, 'HEAD')
  t.equal(head.statusCode, 200)
  t.equal(head.body, '')
  t.equal(head.headers['content-length'], String(Buffer.byteLength(APP_JS)))
  t.equal(head.headers.etag, etag)
  t.equal((await browse(app, `${base}/.env`, token, {}, 'HEAD')).statusCode, 403, 'HEAD follows the same rules')
  t.equal((await browse(app, `${base}/`, undefined, {}, 'HEAD')).statusCode, 302)
})

t.test('files: gzip and brotli variants chosen by Accept-Encoding', async (t) => {
  const { app, token, base } = await fixture(t)
  const identity = await browse(app, `${base}/app.js`, token)
  t.equal(identity.headers['content-encoding'], undefined)
  t.equal(identity.headers.vary, 'Accept-Encoding')
  t.equal(identity.body, APP_JS)

  const br = await browse(app, `${base}/app.js`, token, { 'accept-encoding': 'gzip, deflate, br' })
  t.equal(br.headers['content-encoding'], 'br')
  t.equal(br.headers.vary, 'Accept-Encoding')
  t.equal(zlib.brotliDecompressSync(br.rawPayload).toString(), APP_JS)
  t.ok(br.rawPayload.length < Buffer.byteLength(APP_JS), 'smaller than the file')
  t.equal(br.headers['content-length'], String(br.rawPayload.length))

  const gz = await browse(app, `${base}/app.js`, token, { 'accept-encoding': 'gzip' })
  t.equal(gz.headers['content-encoding'], 'gzip')
  t.equal(zlib.gunzipSync(gz.rawPayload).toString(), APP_JS)

  const preferGzip = await browse(app, `${base}/app.js`, token, { 'accept-encoding': 'br;q=0.5, gzip;q=1' })
  t.equal(preferGzip.headers['content-encoding'], 'gzip', 'q-values are honoured')
  const noBr = await browse(app, `${base}/app.js`, token, { 'accept-encoding': '*, br;q=0' })
  t.equal(noBr.headers['content-encoding'], 'gzip', 'q=0 excludes an encoding')

  t.not(br.headers.etag, gz.headers.etag, 'each representation has its own ETag')
  t.not(gz.headers.etag, identity.headers.etag)
  t.equal((await browse(app, `${base}/app.js`, token, { 'accept-encoding': 'br', 'if-none-match': br.headers.etag as string })).statusCode, 304)

  const page = await browse(app, `${base}/`, token, { 'accept-encoding': 'br' })
  t.match(zlib.brotliDecompressSync(page.rawPayload).toString(), HELPER_SCRIPT, 'compressed HTML has the helper too')

  const png = await browse(app, `${base}/logo.png`, token, { 'accept-encoding': 'gzip, br' })
  t.equal(png.headers['content-encoding'], undefined, 'images are not recompressed')
  t.equal(png.headers.vary, undefined)

  const headBr = await browse(app, `${base}/app.js`, token, { 'accept-encoding': 'br' }, 'HEAD')
  t.equal(headBr.headers['content-length'], br.headers['content-length'], 'HEAD announces the length of the chosen variant')
})

function helperTags (html: string): string[] {
  return [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1])
}

t.test('token helper: injected into every HTML page before the app\'s scripts, allowed by its hash', async (t) => {
  const { app, token, base } = await fixture(t)
  const hash = `'sha256-${createHash('sha256').update(HELPER_SCRIPT).digest('base64')}'`
  t.equal(HELPER_SCRIPT_HASH, hash)

  const index = (await browse(app, `${base}/`, token)).body
  t.ok(index.startsWith('<!DOCTYPE html>\n<html><head><script>'), 'right after <head>, doctype first (no quirks mode)')
  t.ok(index.indexOf(HELPER_SCRIPT) < index.indexOf('src="app.js"'), 'before the app script')
  t.equal(helperTags(index).length, 1)
  t.notOk(index.includes(token), 'the page carries no token')

  const upper = (await browse(app, `${base}/UPPER.html`, token)).body
  t.ok(upper.startsWith(`<!doctype html><HTML><HEAD><script>${HELPER_SCRIPT}</script><TITLE>`), '<HEAD> in capitals')

  const headless = (await browse(app, `${base}/page.htm`, token)).body
  t.ok(headless.startsWith(`<script>${HELPER_SCRIPT}</script><p>`), 'a page without <head> gets it first (.htm too)')

  const res = await browse(app, `${base}/`, token)
  const csp = res.headers['content-security-policy'] as string
  const scriptSrc = csp.split('; ').find((d) => d.startsWith('script-src ')) as string
  t.ok(scriptSrc.split(' ').includes(hash), 'script-src allows the helper by hash')
  t.notOk(/'unsafe-inline'|'strict-dynamic'|'unsafe-eval'/.test(scriptSrc), 'and nothing broader')
  for (const script of helperTags(res.body)) {
    t.equal(`'sha256-${createHash('sha256').update(script).digest('base64')}'`, hash, 'the injected text is exactly the hashed text')
  }
  t.notOk((await browse(app, `${base}/app.js`, token)).body.includes('getServiceAuthToken'), 'only HTML gets the helper')
})

t.test('token helper: the page shapes it must cope with', async (t) => {
  const pages: Files = {
    'public/bom.html': '\ufeff<!DOCTYPE html><html lang="en"><head data-x="1"><script src="a.js"></script></head></html>',
    'public/comment.html': '<!-- <head> in a comment --><!DOCTYPE html><html><head><script src="a.js"></script></head></html>',
    'public/header.html': '<!DOCTYPE html><html><body><header>top</header><script src="a.js"></script></body></html>',
    'public/bare.html': 'plain text page',
    'public/empty.html': ''
  }
  const { app, token, base } = await fixture(t, pages)
  const bom = (await browse(app, `${base}/bom.html`, token)).body
  t.ok(bom.includes(`<head data-x="1"><script>${HELPER_SCRIPT}</script><script src="a.js">`), 'after a <head> with attributes, behind a BOM')
  const comment = (await browse(app, `${base}/comment.html`, token)).body
  t.ok(comment.includes(`<html><head><script>${HELPER_SCRIPT}</script><script src="a.js">`), 'not inside a leading comment')
  const header = (await browse(app, `${base}/header.html`, token)).body
  t.ok(header.startsWith(`<!DOCTYPE html><html><script>${HELPER_SCRIPT}</script><body><header>`), '<header> is not <head>')
  t.equal((await browse(app, `${base}/bare.html`, token)).body, `<script>${HELPER_SCRIPT}</script>plain text page`)
  t.equal((await browse(app, `${base}/empty.html`, token)).body, `<script>${HELPER_SCRIPT}</script>`)
})

t.test('CSP and security headers stay inside /app-ui', async (t) => {
  const { app, token, base } = await fixture(t)
  const res = await browse(app, `${base}/`, token)
  const csp = res.headers['content-security-policy'] as string
  t.equal(csp, [
    `script-src 'self' https://cdn.example.com ${HELPER_SCRIPT_HASH}`,
    "style-src 'self' https://cdn.example.com 'unsafe-inline'",
    "img-src 'self' https://cdn.example.com",
    "font-src 'self' https://cdn.example.com",
    "object-src 'none'",
    "base-uri 'self'",
    "frame-ancestors 'self'"
  ].join('; '), 'the app policy: its allowed origin (reduced from a full URL) for each resource type')
  t.notMatch(csp, /default-src|connect-src/, 'fetch/XHR are governed by CORS, not by this policy')
  t.equal((await browse(app, `${base}/app.js`, token)).headers['content-security-policy'], csp, 'one policy for the whole app')

  const scoped = await browse(app, '/app-ui/@acme/widgets@0.1.0-beta.1/', token)
  t.notMatch(scoped.headers['content-security-policy'] as string, /cdn\.example\.com/, 'each app has its own policy')
  t.match(scoped.headers['content-security-policy'] as string, /^script-src 'self' 'sha256-/)

  t.ok((await browse(app, '/app-ui/nope@1/', token)).headers['content-security-policy'], 'errors of the scope carry a policy too')

  for (const url of ['/healthz', '/api/v1/aktor/x', '/login']) {
    const other = await app.inject({ method: url.startsWith('/api') ? 'POST' : 'GET', url })
    const policy = String(other.headers['content-security-policy'] ?? '')
    t.notOk(policy.includes(HELPER_SCRIPT_HASH) || policy.includes('cdn.example.com'), `${url} is not touched by the app-ui hook`)
  }
})

t.test('cache: files are served from memory within the configured cap; larger ones are streamed', async (t) => {
  const big = Buffer.alloc(1024 * 1024 + 10, 'a')
  const { app, token, base } = await fixture(t, { 'public/big.txt': big, 'public/big.html': `<html><head></head><body>${'b'.repeat(1024 * 1024)}</body></html>` }, { APP_UI_CACHE_BYTES: String(64 * 1024) })
  const res = await browse(app, `${base}/big.txt`, token, { 'accept-encoding': 'br' })
  t.equal(res.statusCode, 200)
  t.equal(res.rawPayload.length, big.length, 'streamed whole')
  t.equal(res.headers['content-encoding'], undefined)
  t.equal(res.headers['content-length'], String(big.length))
  t.match(res.headers.etag, /^W\/"/)
  t.equal((await browse(app, `${base}/big.txt`, token, { 'if-none-match': res.headers.etag as string })).statusCode, 304)
  const head = await browse(app, `${base}/big.txt`, token, {}, 'HEAD')
  t.equal(head.body, '')
  t.equal(head.headers['content-length'], String(big.length))

  const bigPage = await browse(app, `${base}/big.html`, token)
  t.ok(bigPage.body.startsWith(`<html><head><script>${HELPER_SCRIPT}`), 'an HTML page beyond the cache still gets the helper')

  // Well past the 64 KiB cap: everything is still served, whole and right.
  for (let round = 0; round < 2; round++) {
    t.equal((await browse(app, `${base}/app.js`, token, { 'accept-encoding': 'br' })).statusCode, 200)
    t.equal((await browse(app, `${base}/big.txt`, token)).rawPayload.length, big.length)
    t.equal((await browse(app, `${base}/sub/deeper/file.txt`, token)).body, 'deep')
  }
})

/** A table page of `bytes` bytes, varied enough that compressing it costs what a real one does. */
function tablePage (bytes: number): string {
  const rows: string[] = []
  for (let n = 0, size = 0; size < bytes; n++) {
    const row = `<tr><td>${n}</td><td>item-${(n * 2654435761) % 1000003}</td><td>${['ok', 'late', 'failed'][n % 3]}</td></tr>\n`
    rows.push(row)
    size += row.length
  }
  return `<!DOCTYPE html><html><head><title>big</title></head><body><table>${rows.join('')}</table></body></html>`
}

t.test('a large HTML page (over the 1 MiB file limit) is prepared and compressed once, then served from memory', async (t) => {
  const page = tablePage(1.6 * 1024 * 1024)
  const { app, token, base } = await fixture(t, { 'public/large.html': page })
  const injected = page.replace('<head>', `<head><script>${HELPER_SCRIPT}</script>`)
  const before = await metric(app, 'reaktor_app_ui_files_prepared_total')
  const etags = new Set<string>()
  for (const encoding of ['br', 'gzip', undefined, 'br', 'gzip, deflate, br, zstd']) {
    const res = await browse(app, `${base}/large.html`, token, encoding === undefined ? {} : { 'accept-encoding': encoding })
    t.equal(res.statusCode, 200)
    const expected = encoding === undefined ? undefined : encoding === 'gzip' ? 'gzip' : 'br'
    t.equal(res.headers['content-encoding'], expected, `accept-encoding ${encoding ?? '(none)'}`)
    const body = expected === 'br' ? zlib.brotliDecompressSync(res.rawPayload) : expected === 'gzip' ? zlib.gunzipSync(res.rawPayload) : res.rawPayload
    t.ok(body.equals(Buffer.from(injected)), 'the whole page, helper injected')
    t.match(res.headers.etag, /^"/, 'a strong ETag')
    etags.add(res.headers.etag as string)
  }
  t.equal(etags.size, 3, 'one ETag per variant')
  t.equal(await metric(app, 'reaktor_app_ui_files_prepared_total') - before, 1, 'five requests, one preparation')
  t.ok(await metric(app, 'reaktor_app_ui_cache_bytes') > page.length, 'held in the cache')
  const first = [...etags][0]
  t.equal((await browse(app, `${base}/large.html`, token, { 'accept-encoding': 'br', 'if-none-match': first })).statusCode, 304, 'revalidated from memory')
})

t.test('an HTML page too large for the whole cache is served uncompressed, its helper injected per request', async (t) => {
  const page = tablePage(200 * 1024)
  const { app, token, base } = await fixture(t, { 'public/large.html': page }, { APP_UI_CACHE_BYTES: String(128 * 1024) })
  const injected = page.replace('<head>', `<head><script>${HELPER_SCRIPT}</script>`)
  for (let round = 0; round < 3; round++) {
    const res = await browse(app, `${base}/large.html`, token, { 'accept-encoding': 'gzip, deflate, br, zstd' })
    t.equal(res.statusCode, 200)
    t.equal(res.headers['content-encoding'], undefined, 'never compressed per request')
    t.equal(res.body, injected)
    t.equal(res.headers['content-length'], String(Buffer.byteLength(injected)))
    t.equal(res.headers['cache-control'], 'private, no-cache')
    t.match(res.headers.etag, /^W\/"/, 'a weak ETag from size and modification time')
    t.equal((await browse(app, `${base}/large.html`, token, { 'if-none-match': res.headers.etag as string })).statusCode, 304)
    const head = await browse(app, `${base}/large.html`, token, {}, 'HEAD')
    t.equal(head.body, '')
    t.equal(head.headers['content-length'], String(Buffer.byteLength(injected)))
  }
  t.equal(await metric(app, 'reaktor_app_ui_files_prepared_total'), 0, 'nothing was prepared for the cache')
  t.equal(await metric(app, 'reaktor_app_ui_cache_bytes'), 0)
})

t.test('an app without public/ has no UI; other methods are not served', async (t) => {
  const def = await writeApp(t, 'headless', '1.0.0', {})
  await fs.rm(def.publicDir as string, { recursive: true })
  const app = await build(t, { apps: [def, { name: 'codeonly', version: '1.0.0' }] })
  const token = await sessionToken(app)
  t.equal((await browse(app, '/app-ui/headless@1.0.0/', token)).statusCode, 404)
  t.equal((await browse(app, '/app-ui/codeonly@1.0.0/', token)).statusCode, 404)
  t.equal((await app.inject({ method: 'POST', url: '/app-ui/headless@1.0.0/' })).statusCode, 404)
})

t.test('a request target answered from memory (the hot path) carries the scope headers on every answer', async (t) => {
  const { app, token, base } = await fixture(t)
  const url = `${base}/app.js`
  const scope = (res: { headers: Record<string, unknown> }, what: string): void => {
    t.match(res.headers['content-security-policy'], /script-src 'self'.*object-src 'none'/, `${what}: CSP`)
    t.equal(res.headers['x-content-type-options'], 'nosniff', `${what}: nosniff`)
    t.equal(res.headers['referrer-policy'], 'same-origin', `${what}: referrer policy`)
  }
  const first = await browse(app, url, token)
  t.equal(first.statusCode, 200)
  scope(first, 'first answer (resolved)')
  const hot = await browse(app, url, token)
  t.equal(hot.statusCode, 200)
  scope(hot, 'answered from memory')
  const notModified = await browse(app, url, token, { 'if-none-match': hot.headers.etag as string })
  t.equal(notModified.statusCode, 304)
  scope(notModified, '304')
  const head = await browse(app, url, token, {}, 'HEAD')
  t.equal(head.statusCode, 200)
  scope(head, 'HEAD')
  const signedOut = await browse(app, url, undefined)
  t.equal(signedOut.statusCode, 302)
  scope(signedOut, 'no session: the login redirect')
  const unknown = await browse(app, url, 'A'.repeat(43))
  t.equal(unknown.statusCode, 302)
  scope(unknown, 'a token the cache does not know: read, then the login redirect')
})
