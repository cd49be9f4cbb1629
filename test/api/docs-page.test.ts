/**
 * `/docs` over HTTP: public, every answer under it carries the strict policy (no eval, no inline
 * script, calls to this origin only, no framing, no other origin named anywhere), the page names
 * no asset elsewhere, it renders the same document as /api/v1/openapi.json, and the home page
 * links to it. The browser side (rendering, no violation, a call tried out) is
 * test/browser/docs-browser.test.ts.
 */
import t from 'tap'
import { SESSION_COOKIE } from '../../src/auth/types.js'
import { ADMIN, ADMIN_ENV, formLogin, sessionCookie } from '../helpers/auth.js'
import { build } from '../helpers/app.js'

/** The policy as directive → sources. */
function directives (header: string | undefined): Map<string, string[]> {
  return new Map((header ?? '').split(';').map((d) => d.trim().split(/\s+/)).filter((d) => d[0] !== '').map(([name, ...sources]) => [name as string, sources]))
}

t.test('/docs and its assets are public and served under one strict policy', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const page = await app.inject({ method: 'GET', url: '/docs' })
  t.equal(page.statusCode, 200, 'no login needed')
  t.match(page.headers['content-type'], /^text\/html/)
  // Every asset the page names is a path on this service.
  const assets = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1] as string)
  t.ok(assets.length >= 5, `${assets.length} assets named`)
  t.same(assets.filter((a) => !a.startsWith('/docs/')), [], 'all of them under /docs/')

  const urls = ['/docs', '/docs/json', ...assets, '/docs/static/swagger-initializer.js']
  for (const url of urls) {
    const res = await app.inject({ method: 'GET', url })
    t.equal(res.statusCode, 200, `${url}: 200`)
    const csp = directives(res.headers['content-security-policy'] as string | undefined)
    t.same(csp.get('default-src'), ["'none'"], `${url}: nothing unless allowed`)
    t.same(csp.get('connect-src'), ["'self'"], `${url}: calls go to this origin only`)
    t.same(csp.get('frame-ancestors'), ["'none'"], `${url}: nobody frames it`)
    t.same(csp.get('script-src')?.filter((s) => s !== "'self'" && !/^'sha256-[A-Za-z0-9+/=]+'$/.test(s)), [], `${url}: scripts from here (or by hash) only: no unsafe-eval, no unsafe-inline`)
    const sources = [...csp.values()].flat()
    t.same(sources.filter((s) => !/^'(none|self|sha256-[A-Za-z0-9+/=]+)'$/.test(s) && s !== 'data:'), [], `${url}: no other origin, scheme or unsafe keyword anywhere`)
    t.equal(res.headers['x-frame-options'], 'DENY', `${url}: X-Frame-Options`)
    t.equal(res.headers['x-content-type-options'], 'nosniff')
  }

  const rendered = (await app.inject({ method: 'GET', url: '/docs/json' })).json()
  t.same(rendered, (await app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json(), 'the page renders the API document')
  t.equal((await app.inject({ method: 'GET', url: '/api/v1/polling' })).statusCode, 401, 'the API itself still needs the token')
})

t.test('the home page links to the docs page', async (t) => {
  const app = await build(t, { env: ADMIN_ENV })
  const cookie = sessionCookie(await formLogin(app, ADMIN))?.value ?? ''
  const home = await app.inject({ method: 'GET', url: '/', cookies: { [SESSION_COOKIE]: cookie } })
  t.equal(home.statusCode, 200)
  t.match(home.body, /<a href="\/docs">API documentation<\/a>/)
})
