import t from 'tap'
import { safeRedirect } from '../../src/auth/redirect.js'

t.test('same-origin paths are kept, normalised by the URL parser', async (t) => {
  const kept: Array<[string, string]> = [
    ['/', '/'],
    ['/app-ui/@acme/widgets@0.1.0/', '/app-ui/@acme/widgets@0.1.0/'],
    ['/app-ui/@acme/widgets@0.1.0/?x=1', '/app-ui/@acme/widgets@0.1.0/?x=1'],
    ['/app-ui/demo@1.0.0/page.html?a=1&b=two#section', '/app-ui/demo@1.0.0/page.html?a=1&b=two#section'],
    ['/a/../b', '/b'],
    ['/%2F%2Fevil', '/%2F%2Fevil'],
    ['/café', '/caf%C3%A9']
  ]
  for (const [input, expected] of kept) t.equal(safeRedirect(input), expected, JSON.stringify(input))
})

t.test('anything that could leave the origin falls back to /', async (t) => {
  const rejected = [
    '//evil',
    '//evil.example/path',
    '/\\evil',
    '\\\\evil',
    '/\\/evil',
    'https://evil',
    'http://evil.example/',
    'HTTPS://evil',
    'javascript:alert(1)',
    'JaVaScRiPt:alert(1)',
    'data:text/html,<script>alert(1)</script>',
    '/..//evil',
    '/a/../..//evil',
    '/.//evil',
    '%2F%2Fevil',
    '/\t/evil',
    '/\n/evil',
    '\t//evil',
    '/ok\r\nSet-Cookie: x=1',
    '/ok\rx',
    '/ok\nx',
    '/ok\u0000',
    'evil',
    'evil.example/path',
    '?x=1',
    '#top',
    '',
    ' //evil'
  ]
  for (const input of rejected) t.equal(safeRedirect(input), '/', JSON.stringify(input))
  t.equal(safeRedirect('/' + 'a'.repeat(5000)), '/', 'an overlong path')
})

t.test('non-strings fall back to /', async (t) => {
  for (const input of [undefined, null, 42, ['/a'], { href: '/a' }]) t.equal(safeRedirect(input), '/')
})

t.test('whatever it returns is a same-origin path for a browser', async (t) => {
  // Resolve every result against a real origin the way a browser resolves a Location header.
  const inputs = ['/a', '/..//evil', '//evil', '/\\evil', '/%2e%2e//evil', '/%2e%2e/%2fevil', '/././/evil', '/app-ui/x@1/#//evil']
  for (const input of inputs) {
    const target = safeRedirect(input)
    t.equal(new URL(target, 'https://service.example').origin, 'https://service.example', `${JSON.stringify(input)} → ${target}`)
    t.notOk(target.startsWith('//'), `${JSON.stringify(input)} → ${target}`)
  }
})
