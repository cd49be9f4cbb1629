import fs from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { buildCsp, loadAllowedOrigins, parseAllowedOrigins, toOrigin, EXTERNAL_RESOURCES_FILE } from '../../src/app-ui/csp.js'
import { HELPER_SCRIPT_HASH } from '../../src/app-ui/helper-script.js'
import { build } from '../helpers/app.js'
import { tempDir } from '../helpers/temp-dir.js'
import { browse, writeApp } from '../helpers/app-ui.js'
import { sessionToken } from '../helpers/auth.js'
import { memoryLogger, type MemoryLogger } from '../helpers/log.js'

/** The messages of the lines a recorder got (all warnings: the CSP code logs nothing else). */
function warnings (log: MemoryLogger): string[] {
  return log.lines.map((l) => l.msg ?? '')
}

t.test('entries are reduced to their origin', async (t) => {
  const cases: Record<string, string> = {
    'https://cdn.example.com': 'https://cdn.example.com',
    'https://cdn.example.com/': 'https://cdn.example.com',
    'https://cdn.example.com/lib/x.js?v=1#frag': 'https://cdn.example.com',
    'HTTPS://CDN.Example.COM:443/a': 'https://cdn.example.com',
    'http://127.0.0.1:8080/path': 'http://127.0.0.1:8080',
    'http://localhost:3001': 'http://localhost:3001',
    'https://bücher.example': 'https://xn--bcher-kva.example'
  }
  for (const [entry, origin] of Object.entries(cases)) t.same(toOrigin(entry), { origin }, entry)
})

t.test('anything that could widen the policy is refused', async (t) => {
  const refused = [
    '*', 'https://*.example.com', "'unsafe-inline'", "'unsafe-eval'", "'self'", "'none'", 'self', 'unsafe-eval',
    "https://a.example 'unsafe-eval'", 'https://a.example; script-src *', 'https://a.example,https://b.example',
    'https://a.example\tb', 'https://a.exa\nmple', 'https://"a.example"', 'data:', 'data:text/javascript,alert(1)',
    'blob:https://a.example/x', 'javascript:alert(1)', 'file:///etc/passwd', 'ftp://a.example', 'ws://a.example',
    'https://user:pass@a.example', 'https://user@a.example', 'https:', 'https://', '//a.example', 'a.example',
    '', 'http://[::1]:8080', 'https://a.example\\@b.example'
  ]
  for (const entry of refused) t.ok('reason' in toOrigin(entry), `${JSON.stringify(entry)} refused`)
  t.ok('reason' in toOrigin(42), 'not a string')
})

t.test('parseAllowedOrigins keeps the good entries, warns about each bad one naming the app', async (t) => {
  const log = memoryLogger()
  const origins = parseAllowedOrigins({ allowedOrigins: ['https://a.example/x.js', '*', 'https://a.example', "'unsafe-eval'", 'http://b.example:81'] }, 'demo@1.0.0', log)
  t.same(origins, ['https://a.example', 'http://b.example:81'], 'deduplicated, in order')
  t.equal(warnings(log).length, 2)
  for (const w of warnings(log)) t.match(w, /demo@1\.0\.0/)

  for (const bad of [null, [], 'x', 42, {}, { allowedOrigins: 'https://a.example' }, { allowedOrigins: [1, 'https://a.example'] }, { allowedOrigins: { 0: 'https://a.example' } }]) {
    const r = memoryLogger()
    t.same(parseAllowedOrigins(bad, 'demo@1.0.0', r), [], `${JSON.stringify(bad)} → same-origin only`)
    t.equal(warnings(r).length, 1)
    t.match(warnings(r)[0], /demo@1\.0\.0.*same-origin/)
  }
  const empty = memoryLogger()
  t.same(parseAllowedOrigins({ allowedOrigins: [] }, 'demo@1.0.0', empty), [])
  t.equal(warnings(empty).length, 0, 'an empty list is a valid choice')
})

t.test('the policy text', async (t) => {
  const csp = buildCsp(['https://a.example', 'http://b.example:81'])
  const directives = Object.fromEntries(csp.split('; ').map((d) => { const [name, ...values] = d.split(' '); return [name, values] }))
  t.same(Object.keys(directives).sort(), ['base-uri', 'font-src', 'frame-ancestors', 'img-src', 'object-src', 'script-src', 'style-src'])
  t.same(directives['script-src'], ["'self'", 'https://a.example', 'http://b.example:81', HELPER_SCRIPT_HASH])
  t.same(directives['style-src'], ["'self'", 'https://a.example', 'http://b.example:81', "'unsafe-inline'"])
  t.same(directives['img-src'], ["'self'", 'https://a.example', 'http://b.example:81'])
  t.same(directives['font-src'], ["'self'", 'https://a.example', 'http://b.example:81'])
  t.same(directives['object-src'], ["'none'"])
  t.same(directives['base-uri'], ["'self'"])
  t.same(directives['frame-ancestors'], ["'self'"])
  t.notMatch(csp, /default-src|connect-src|strict-dynamic|unsafe-eval/)
  t.equal(buildCsp([]), `script-src 'self' ${HELPER_SCRIPT_HASH}; style-src 'self' 'unsafe-inline'; img-src 'self'; font-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'self'`)
})

t.test('the config file: absent (a debug line), malformed, unreadable or linked outside (a warning) → same-origin', async (t) => {
  const dir = await tempDir(t)
  const outside = await tempDir(t)
  const file = path.join(dir, EXTERNAL_RESOURCES_FILE)

  let r = memoryLogger()
  const debug: string[] = []
  r.debug = (_obj: unknown, msg?: string) => { debug.push(msg ?? '') }
  t.same(await loadAllowedOrigins(dir, 'app@1', r), [])
  t.same(warnings(r), [], 'absent: the file is optional, so no warning')
  t.match(debug, [/^app app@1: no \.service-external-resources\.json; only same-origin resources are allowed$/], 'only a debug line')

  await fs.writeFile(file, '{ "allowedOrigins": [')
  r = memoryLogger()
  t.same(await loadAllowedOrigins(dir, 'app@1', r), [])
  t.match(warnings(r), [/app@1.*not valid JSON/], 'malformed')

  await fs.writeFile(file, JSON.stringify({ allowedOrigins: ['https://ok.example/lib.js'] }))
  r = memoryLogger()
  t.same(await loadAllowedOrigins(dir, 'app@1', r), ['https://ok.example'])
  t.same(warnings(r), [])

  await fs.rm(file)
  await fs.writeFile(path.join(outside, 'x.json'), JSON.stringify({ allowedOrigins: ['https://evil.example'] }))
  await fs.symlink(path.join(outside, 'x.json'), file)
  r = memoryLogger()
  t.same(await loadAllowedOrigins(dir, 'app@1', r), [], 'a link out of public/ is not followed')
  t.match(warnings(r), [/app@1: unreadable/])

  await fs.rm(file)
  await fs.mkdir(file)
  r = memoryLogger()
  t.same(await loadAllowedOrigins(dir, 'app@1', r), [], 'a folder instead of a file')
  t.equal(warnings(r).length, 1)
})

t.test('the served header follows each app\'s file, and the file itself is never served', async (t) => {
  const good = await writeApp(t, 'good', '1.0.0', {
    'public/index.html': '<p>good</p>',
    'public/.service-external-resources.json': JSON.stringify({ allowedOrigins: ['https://cdn.example.com/x.js', 'http://127.0.0.1:9999', '*', "'unsafe-eval'"] })
  })
  const broken = await writeApp(t, 'broken', '1.0.0', { 'public/index.html': '<p>broken</p>', 'public/.service-external-resources.json': 'not json' })
  const none = await writeApp(t, 'none', '1.0.0', { 'public/index.html': '<p>none</p>' })
  const app = await build(t, { apps: [good, broken, none] })
  const token = await sessionToken(app)

  const policy = async (name: string): Promise<string> => (await browse(app, `/app-ui/${name}@1.0.0/`, token)).headers['content-security-policy'] as string
  const goodCsp = await policy('good')
  t.match(goodCsp, /^script-src 'self' https:\/\/cdn\.example\.com http:\/\/127\.0\.0\.1:9999 'sha256-/)
  t.notMatch(goodCsp, /\*|unsafe-eval|x\.js/)
  t.equal(await policy('broken'), buildCsp([]))
  t.equal(await policy('none'), buildCsp([]))
  t.equal((await browse(app, '/app-ui/good@1.0.0/.service-external-resources.json', token)).statusCode, 403)
})
