import nodeFs from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import zlib from 'node:zlib'
import t, { type Test } from 'tap'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { HELPER_SCRIPT } from '../../src/app-ui/helper-script.js'
import { buildLogged, metric } from '../helpers/app.js'
import type { TestContext } from '../helpers/test-context.js'
import { deadline, waitFor } from '../helpers/timing.js'
import { browse, writeApp, type Files } from '../helpers/app-ui.js'
import { sessionToken } from '../helpers/auth.js'

/** How often and how long a test looks for the new content (the service aims at under a second). */
const POLL = { intervalMs: 25, timeoutMs: deadline(10_000) }

const BR = { 'accept-encoding': 'br' }
const APP_JS = (version: number): string => `window.version = ${version};\n${'// long enough to be worth compressing\n'.repeat(30)}`

const FILES: Files = {
  'public/index.html': '<!DOCTYPE html><html><head><title>v1</title></head><body>page one</body></html>',
  'public/app.js': APP_JS(1),
  'public/secret.txt': 'published by mistake',
  'public/sub/page.txt': 'sub one',
  'public/.service-external-resources.json': JSON.stringify({ allowedOrigins: ['https://one.example.com'] })
}

interface Fixture { app: FastifyInstance, token: string, pub: string, base: string, lines: string[] }

async function fixture (t: TestContext, files: Files = FILES): Promise<Fixture> {
  const def = await writeApp(t, 'live', '1.0.0', files)
  const { app, lines } = await buildLogged(t, {}, [def])
  return { app, token: await sessionToken(app), pub: def.publicDir as string, base: '/app-ui/live@1.0.0', lines }
}

function decoded (res: LightMyRequestResponse): string {
  return res.headers['content-encoding'] === 'br' ? zlib.brotliDecompressSync(res.rawPayload).toString() : res.body
}

/**
 * Polls `url` until `fresh` holds for its answer, and reports (and returns) how long after
 * `changedAt` that was. Fails the test after POLL.timeoutMs.
 */
async function servedFresh (t: Test, f: Fixture, what: string, url: string, changedAt: number, fresh: (res: LightMyRequestResponse) => boolean, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  const res = await waitFor(async () => {
    const res = await browse(f.app, f.base + url, f.token, headers)
    return fresh(res) ? res : undefined
  }, { ...POLL, what })
  t.comment(`${what}: served fresh ${Date.now() - changedAt} ms after the change`)
  t.same(fallbackWarnings(f), [], `${what}: by the watch, not by checks on disk`)
  return res
}


/** Answers `url` twice, so that it is prepared, cached and on the hot path before the change. */
async function warm (f: Fixture, url: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  await browse(f.app, f.base + url, f.token, headers)
  return await browse(f.app, f.base + url, f.token, headers)
}

/** Warnings that the app fell back to checking every request on disk. */
function fallbackWarnings (f: Fixture): string[] {
  return f.lines.filter((l) => l.includes('"level":40') && l.includes('cannot be watched'))
}

/**
 * After a change: the app is still watched (no fallback), and once `url` has been answered again
 * it is answered from memory without checking its path on disk or preparing the file: freshness
 * comes from the watch, not from checking every request.
 */
async function watchedAgain (t: Test, f: Fixture, url: string, headers: Record<string, string> = {}): Promise<void> {
  t.same(fallbackWarnings(f), [], 'still watched')
  const counts = async (): Promise<string> => [
    await metric(f.app, 'reaktor_app_ui_path_checks_total'),
    await metric(f.app, 'reaktor_app_ui_files_prepared_total')
  ].join(' ')
  // A round with no check and no preparation: one event of the change reported late may still
  // cost the round before it.
  await waitFor(async () => {
    const first = await warm(f, url, headers)
    const before = await counts()
    for (let i = 0; i < 3; i++) {
      if ((await browse(f.app, f.base + url, f.token, headers)).body !== first.body) return false
    }
    return await counts() === before
  }, { ...POLL, what: `${url} answered from memory without a path check` })
}

t.test('a changed file is served fresh, from memory again once read (brotli variant too)', async (t) => {
  const f = await fixture(t)
  const before = await warm(f, '/app.js', BR)
  t.equal(before.headers['content-encoding'], 'br')
  t.equal(decoded(before), APP_JS(1))
  t.equal(decoded(await warm(f, '/app.js')), APP_JS(1), 'identity too')

  await fs.writeFile(path.join(f.pub, 'app.js'), APP_JS(2))
  const changedAt = Date.now()
  const after = await servedFresh(t, f, 'changed file (br)', '/app.js', changedAt, (res) => decoded(res) === APP_JS(2), BR)
  t.equal(after.headers['content-encoding'], 'br', 'still compressed')
  t.not(after.headers.etag, before.headers.etag, 'a new validator')
  t.equal((await browse(f.app, `${f.base}/app.js`, f.token)).body, APP_JS(2), 'the identity variant is fresh too')
  t.equal((await browse(f.app, `${f.base}/app.js`, f.token, { ...BR, 'if-none-match': before.headers.etag as string })).statusCode, 200, 'the old ETag no longer matches')

  // Once fresh, it is held in memory again: more requests prepare nothing.
  const prepared = await metric(f.app, 'reaktor_app_ui_files_prepared_total')
  for (let i = 0; i < 3; i++) t.equal(decoded(await browse(f.app, `${f.base}/app.js`, f.token, BR)), APP_JS(2))
  t.equal(await metric(f.app, 'reaktor_app_ui_files_prepared_total'), prepared, 'served from memory')
  await watchedAgain(t, f, '/app.js', BR)
})

t.test('a file rewritten in place leaves the other files of the app on their hot paths', async (t) => {
  const f = await fixture(t)
  await warm(f, '/app.js')
  await warm(f, '/sub/page.txt')
  for (let round = 2; round <= 4; round++) {
    await fs.writeFile(path.join(f.pub, 'sub', 'page.txt'), `sub ${round}`)
    await servedFresh(t, f, `rewritten file, round ${round}`, '/sub/page.txt', Date.now(), (res) => res.body === `sub ${round}`)
    const checks = await metric(f.app, 'reaktor_app_ui_path_checks_total')
    t.equal((await browse(f.app, `${f.base}/app.js`, f.token)).body, APP_JS(1))
    t.equal(await metric(f.app, 'reaktor_app_ui_path_checks_total'), checks, 'another file is answered without a path check')
  }
})

t.test('an added file, and one in a folder made after start, are served', async (t) => {
  const f = await fixture(t)
  t.equal((await warm(f, '/added.txt')).statusCode, 404)
  t.equal((await warm(f, '/new/deeper/file.txt')).statusCode, 404)

  await fs.writeFile(path.join(f.pub, 'added.txt'), 'added')
  await servedFresh(t, f, 'added file', '/added.txt', Date.now(), (res) => res.statusCode === 200 && res.body === 'added')

  await fs.mkdir(path.join(f.pub, 'new', 'deeper'), { recursive: true })
  await fs.writeFile(path.join(f.pub, 'new', 'deeper', 'file.txt'), 'deep one')
  await servedFresh(t, f, 'added file in a new subfolder', '/new/deeper/file.txt', Date.now(), (res) => res.body === 'deep one')

  // The new folder is watched too: a later change inside it is seen.
  await warm(f, '/new/deeper/file.txt')
  await fs.writeFile(path.join(f.pub, 'new', 'deeper', 'file.txt'), 'deep two')
  await servedFresh(t, f, 'changed file in the new subfolder', '/new/deeper/file.txt', Date.now(), (res) => res.body === 'deep two')
})

t.test('a removed file answers 404; so do files of a removed folder', async (t) => {
  const f = await fixture(t)
  t.equal((await warm(f, '/secret.txt', BR)).body, 'published by mistake')
  await fs.rm(path.join(f.pub, 'secret.txt'))
  await servedFresh(t, f, 'removed file', '/secret.txt', Date.now(), (res) => res.statusCode === 404, BR)
  t.notMatch((await browse(f.app, `${f.base}/secret.txt`, f.token)).body, /published by mistake/)

  t.equal((await warm(f, '/sub/page.txt')).body, 'sub one')
  await fs.rename(path.join(f.pub, 'sub'), path.join(f.pub, 'moved'))
  await servedFresh(t, f, 'file of a renamed folder', '/sub/page.txt', Date.now(), (res) => res.statusCode === 404)
  t.equal((await browse(f.app, `${f.base}/moved/page.txt`, f.token)).body, 'sub one', 'served at its new place')
  await fs.writeFile(path.join(f.pub, 'moved', 'page.txt'), 'moved two')
  await servedFresh(t, f, 'changed file in the renamed folder', '/moved/page.txt', Date.now(), (res) => res.body === 'moved two')
})

t.test('a changed index.html is served fresh with the token helper', async (t) => {
  const f = await fixture(t)
  t.match((await warm(f, '/', BR)).headers['content-encoding'], /^(br)?$/)
  t.match((await warm(f, '/')).body, /page one/)
  const page = '<!DOCTYPE html><html><head><title>v2</title></head><body>page two, longer than before</body></html>'
  await fs.writeFile(path.join(f.pub, 'index.html'), page)
  const res = await servedFresh(t, f, 'changed index.html', '/', Date.now(), (res) => res.body.includes('page two'))
  t.equal(res.body, page.replace('<head>', `<head><script>${HELPER_SCRIPT}</script>`), 'the helper is injected into the new page')
  t.equal(res.headers['content-length'], String(Buffer.byteLength(res.body)))
})

t.test('a changed external-resources file rebuilds the policy', async (t) => {
  const f = await fixture(t)
  t.match((await warm(f, '/app.js')).headers['content-security-policy'], /https:\/\/one\.example\.com/)
  t.match((await warm(f, '/')).headers['content-security-policy'], /https:\/\/one\.example\.com/)
  await fs.writeFile(path.join(f.pub, '.service-external-resources.json'), JSON.stringify({ allowedOrigins: ['https://two.example.com/x'] }))
  const changedAt = Date.now()
  const res = await servedFresh(t, f, 'changed external-resources file', '/app.js', changedAt, (res) => String(res.headers['content-security-policy']).includes('https://two.example.com'))
  t.notMatch(res.headers['content-security-policy'], /one\.example\.com/, 'the old origin is gone')
  t.match((await browse(f.app, `${f.base}/`, f.token)).headers['content-security-policy'], /^script-src 'self' https:\/\/two\.example\.com /, 'for every file of the app')
  t.ok(f.lines.some((l) => l.includes('"level":30') && l.includes('live@1.0.0') && l.includes('Content-Security-Policy is rebuilt')), 'the rebuild is logged')

  await fs.rm(path.join(f.pub, '.service-external-resources.json'))
  await servedFresh(t, f, 'removed external-resources file', '/app.js', Date.now(), (res) => !String(res.headers['content-security-policy']).includes('example.com'))
  // Its absence is no warning (the file is optional): only the rebuild is logged.
  const rebuilt = f.lines.filter((l) => l.includes('Content-Security-Policy is rebuilt'))
  t.match(rebuilt.at(-1), /"level":30.*"allowedOrigins":\[\]/, 'the rebuild to same-origin only is logged')
  t.notOk(f.lines.some((l) => l.includes('"level":40') && l.includes('.service-external-resources.json')), 'without a warning')
})

t.test('a file replaced by rename, as editors save, is served fresh, and so are later edits and its removal', async (t) => {
  const f = await fixture(t)
  t.equal(decoded(await warm(f, '/app.js', BR)), APP_JS(1))
  const target = path.join(f.pub, 'app.js')
  await fs.writeFile(`${target}.tmp`, APP_JS(3))
  await fs.rename(`${target}.tmp`, target)
  await servedFresh(t, f, 'file replaced by rename', '/app.js', Date.now(), (res) => decoded(res) === APP_JS(3), BR)

  await warm(f, '/app.js', BR)
  await fs.writeFile(target, APP_JS(4))
  await servedFresh(t, f, 'edit in place after a rename', '/app.js', Date.now(), (res) => decoded(res) === APP_JS(4), BR)

  await warm(f, '/app.js', BR)
  await fs.rm(target)
  await servedFresh(t, f, 'removal after a rename', '/app.js', Date.now(), (res) => res.statusCode === 404, BR)
})

t.test('a file written in several steps, and read between them, is served whole after the last', async (t) => {
  const f = await fixture(t)
  t.equal(decoded(await warm(f, '/app.js', BR)), APP_JS(1))
  const handle = await fs.open(path.join(f.pub, 'app.js'), 'w')
  t.teardown(async () => { await handle.close().catch(() => {}) })
  const whole = APP_JS(6)
  const half = whole.slice(0, whole.length / 2)
  await handle.write(half)
  // The half-written file is read, prepared and kept in memory: the next write must drop it.
  await servedFresh(t, f, 'first half of a file being written', '/app.js', Date.now(), (res) => decoded(res) === half, BR)
  await warm(f, '/app.js', BR)
  await handle.write(whole.slice(half.length))
  await servedFresh(t, f, 'whole file after the last write', '/app.js', Date.now(), (res) => decoded(res) === whole, BR)
  await handle.close()
})

t.test('a public/ folder removed while served answers 404, and is watched again once put back', async (t) => {
  const f = await fixture(t)
  t.equal(decoded(await warm(f, '/app.js', BR)), APP_JS(1))
  const saved = `${f.pub}-saved`
  await fs.rename(f.pub, saved)
  await servedFresh(t, f, 'public/ moved away', '/app.js', Date.now(), (res) => res.statusCode === 404, BR)
  const gone = (): string[] => f.lines.filter((l) => l.includes('"level":40') && l.includes('is gone'))
  await waitFor(() => gone().length === 1, { ...POLL, what: 'the warning' })
  t.match(gone()[0], /live@1\.0\.0/, 'names the app')

  await fs.rename(saved, f.pub)
  await servedFresh(t, f, 'public/ put back', '/app.js', Date.now(), (res) => decoded(res) === APP_JS(1), BR)
  await watchedAgain(t, f, '/app.js', BR)
  await fs.writeFile(path.join(f.pub, 'app.js'), APP_JS(5))
  await servedFresh(t, f, 'a change after public/ was put back', '/app.js', Date.now(), (res) => decoded(res) === APP_JS(5), BR)
  await fs.rm(path.join(f.pub, 'secret.txt'))
  await servedFresh(t, f, 'a removal after public/ was put back', '/secret.txt', Date.now(), (res) => res.statusCode === 404)
  await watchedAgain(t, f, '/app.js', BR)
  t.equal(gone().length, 1, 'warned once')
})

/**
 * Removes the folder at `folder` and makes it again with `file` in it, until the new folder gets
 * the inode number of the old one (ext4 hands a freed one out again at once), or `tries` times.
 * Each round waits until `url` serves the new content.
 */
async function remakeFolder (t: Test, f: Fixture, folder: string, file: string, url: string, tries = 30): Promise<void> {
  for (let i = 0; i < tries; i++) {
    // In one go, as a script's `rm -r` and `mkdir` would: the events are read after both.
    const before = nodeFs.statSync(folder).ino
    nodeFs.rmSync(folder, { recursive: true })
    nodeFs.mkdirSync(folder)
    nodeFs.writeFileSync(path.join(folder, file), `remade ${i}`)
    const reused = nodeFs.statSync(folder).ino === before
    await waitFor(async () => (await browse(f.app, f.base + url, f.token)).body === `remade ${i}`, { ...POLL, what: `round ${i}` })
    if (reused) {
      t.comment(`inode number reused at round ${i}`)
      return
    }
  }
  t.comment('the file system never reused the inode number')
}

t.test('a folder removed and made again (its inode number reused) is watched anew', async (t) => {
  const f = await fixture(t)
  t.equal((await warm(f, '/sub/page.txt')).body, 'sub one')
  const sub = path.join(f.pub, 'sub')
  await remakeFolder(t, f, sub, 'page.txt', '/sub/page.txt')
  await warm(f, '/sub/page.txt')
  await fs.writeFile(path.join(sub, 'page.txt'), 'a later edit')
  await servedFresh(t, f, 'edit in a folder made again', '/sub/page.txt', Date.now(), (res) => res.body === 'a later edit')
  await watchedAgain(t, f, '/sub/page.txt')
  await fs.rm(path.join(sub, 'page.txt'))
  await servedFresh(t, f, 'removal in a folder made again', '/sub/page.txt', Date.now(), (res) => res.statusCode === 404)
})

t.test('public/ itself removed and made again (its inode number reused) is watched anew', async (t) => {
  const f = await fixture(t, { 'public/a.txt': 'first' })
  t.equal((await warm(f, '/a.txt')).body, 'first')
  await remakeFolder(t, f, f.pub, 'a.txt', '/a.txt')
  await warm(f, '/a.txt')
  await fs.writeFile(path.join(f.pub, 'a.txt'), 'a later edit')
  await servedFresh(t, f, 'edit in public/ made again', '/a.txt', Date.now(), (res) => res.body === 'a later edit')
  await watchedAgain(t, f, '/a.txt')
})

t.test('folders made and removed at once (a build tool\'s scratch folders) leave the app watched', async (t) => {
  const f = await fixture(t)
  for (let i = 0; i < 200; i++) {
    const scratch = path.join(f.pub, `scratch-${i}`)
    await fs.mkdir(scratch)
    await fs.rmdir(scratch)
  }
  await warm(f, '/app.js')
  await fs.writeFile(path.join(f.pub, 'app.js'), APP_JS(7))
  await servedFresh(t, f, 'a change after scratch folders', '/app.js', Date.now(), (res) => res.body === APP_JS(7))
  await watchedAgain(t, f, '/app.js')
})

t.test('an external-resources file that is a link: a change of the file it leads to rebuilds the policy', async (t) => {
  const f = await fixture(t, { 'public/app.js': 'x', 'public/config/policy.json': JSON.stringify({ allowedOrigins: ['https://revoked.example.com'] }) })
  await fs.symlink('config/policy.json', path.join(f.pub, '.service-external-resources.json'))
  await servedFresh(t, f, 'linked external-resources file', '/app.js', Date.now(), (res) => String(res.headers['content-security-policy']).includes('revoked.example.com'))
  await warm(f, '/app.js')
  await fs.writeFile(path.join(f.pub, 'config', 'policy.json'), JSON.stringify({ allowedOrigins: [] }))
  const res = await servedFresh(t, f, 'origin revoked in the linked file', '/app.js', Date.now(), (res) => !String(res.headers['content-security-policy']).includes('revoked.example.com'))
  t.match(res.headers['content-security-policy'], /^script-src 'self' 'sha256-/, 'same-origin only')
  await watchedAgain(t, f, '/app.js')
})

t.test('a public/ that is a link: flipped to another release, it is served from there, and watched there', async (t) => {
  const def = await writeApp(t, 'live', '1.0.0', { 'releases/r1/app.js': 'release one', 'releases/r2/app.js': 'release two' })
  await fs.rm(def.publicDir as string, { recursive: true })
  await fs.symlink('releases/r1', def.publicDir as string)
  const { app, lines } = await buildLogged(t, {}, [def])
  const f: Fixture = { app, token: await sessionToken(app), pub: def.publicDir as string, base: '/app-ui/live@1.0.0', lines }
  t.equal((await warm(f, '/app.js')).body, 'release one')
  // As `ln -sfn` does: a new link renamed over the old one.
  await fs.symlink('releases/r2', `${f.pub}.new`)
  await fs.rename(`${f.pub}.new`, f.pub)
  await servedFresh(t, f, 'public/ link flipped', '/app.js', Date.now(), (res) => res.body === 'release two')
  await watchedAgain(t, f, '/app.js')
  await fs.writeFile(path.join(def.dir as string, 'releases', 'r2', 'app.js'), 'release two, patched')
  await servedFresh(t, f, 'a change in the new release', '/app.js', Date.now(), (res) => res.body === 'release two, patched')
  await fs.rm(path.join(def.dir as string, 'releases', 'r1'), { recursive: true })
  t.equal((await browse(f.app, `${f.base}/app.js`, f.token)).body, 'release two, patched', 'the old release removed: no matter')
  t.same(fallbackWarnings(f), [])
})

t.test('a public/ folder replaced by a link to another folder is served from there', async (t) => {
  const f = await fixture(t, { 'public/app.js': 'old', 'r2/app.js': 'new' })
  t.equal((await warm(f, '/app.js')).body, 'old')
  await fs.rename(f.pub, path.join(path.dirname(f.pub), 'r1'))
  await fs.symlink('r2', f.pub)
  await servedFresh(t, f, 'public/ replaced by a link', '/app.js', Date.now(), (res) => res.body === 'new')
  await watchedAgain(t, f, '/app.js')
})
