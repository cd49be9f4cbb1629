/**
 * `/api/v1/apps` on one node: publish (`npm pack` output as the body), the same bytes again (200),
 * other bytes under a stored version (409), a package that would not load (422, nothing stored),
 * activation and rollback (the next aktor call uses the active version), every stored version's UI
 * served at its own path, deleting a version (the active one refused) and the app, the audit rows,
 * and a node started afresh on the database with an empty apps folder runs the active versions.
 */
import fs from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { ADMIN_ENV, apiAs, loginToken } from '../helpers/auth.js'
import { build } from '../helpers/app.js'
import { npmPack, writeApp } from '../helpers/app-folder.js'
import { browse } from '../helpers/app-ui.js'
import { createTestDatabase } from '../helpers/database.js'
import { tempDir } from '../helpers/temp-dir.js'
import type { TestContext } from '../helpers/test-context.js'
import { waitFor } from '../helpers/timing.js'


/** An app answering its version from the aktor `which` and from its page. */
function files (version: string, extra = ''): Record<string, string> {
  return {
    'package.json': JSON.stringify({ name: 'pub-demo', version, type: 'module', main: 'index.js' }),
    'index.js': `export const reaktors = [{ reaktorDefinitionId: 'which', createReaktor: () => async () => ({ version: '${version}' }) }]\n` +
      `export const pollingReaktors = [{ reaktorDefinitionId: 'pub-tick', interval: '1h', autoStart: true, createReaktor: () => async () => false }]\n${extra}`,
    'public/index.html': `<!doctype html><title>pub-demo ${version}</title><p>version ${version}</p>\n`
  }
}

/** `npm pack` of a folder with these files: the tarball's bytes. */
async function pack (t: TestContext, contents: Record<string, string>): Promise<Buffer> {
  return await fs.readFile(await npmPack(await writeApp(await tempDir(t, 'pub-app-'), 'app', undefined, contents)))
}

t.test('publish, republish, activate, roll back and delete on a running node', async (t) => {
  const databaseUrl = await createTestDatabase(t)
  const app = await build(t, { env: ADMIN_ENV, databaseUrl })
  const token = await loginToken(app)
  const call = apiAs(app, token)
  const v1 = await pack(t, files('1.0.0'))
  const v2 = await pack(t, files('2.0.0'))

  const first = await call('POST', '/api/v1/apps', v1)
  t.equal(first.statusCode, 201)
  t.match(first.body, { name: 'pub-demo', version: '1.0.0', stored: true, activated: true, previous: null, size: v1.length, thisNode: { nodeId: app.config.nodeId, version: '1.0.0', error: null } })
  t.same((await call('POST', '/api/v1/aktor/which', {})).body, { version: '1.0.0' }, 'the receiving node runs it when it answers')
  t.match((await call('GET', '/api/v1/polling/pub-tick/status')).body, { state: 'running', app: 'pub-demo' }, 'its autoStart reaktor is registered and started')

  const again = await call('POST', '/api/v1/apps', v1)
  t.equal(again.statusCode, 200, 'the same bytes again: nothing changes')
  t.match(again.body, { stored: false, activated: false })
  const other = await call('POST', '/api/v1/apps', await pack(t, files('1.0.0', '// other bytes\n')))
  t.equal(other.statusCode, 409)
  t.match(other.body.message, /pub-demo@1\.0\.0 is already published with other contents/)
  const folders = async (): Promise<string[]> => (await fs.readdir(path.join(app.config.dataDir, 'apps'))).filter((e) => e.startsWith('pub-demo@')).sort()
  t.equal((await folders()).length, 1, 'the refused bytes left no folder behind')

  const broken = await call('POST', '/api/v1/apps', await pack(t, files('3.0.0', 'export const broken = (1,\nexport const x = 2\n')))
  t.equal(broken.statusCode, 422)
  t.match(broken.body.message, /^The package would not load: app pub-demo@3\.0\.0: entry module "index\.js" failed to import: SyntaxError at index\.js:4:1: Unexpected token 'export'\n {4}export const x = 2\n {4}\^/)

  const second = await call('POST', '/api/v1/apps', v2)
  t.match(second, { statusCode: 201, body: { version: '2.0.0', previous: '1.0.0', activated: true } })
  t.same((await call('POST', '/api/v1/aktor/which', {})).body, { version: '2.0.0' })
  t.match((await browse(app, '/app-ui/pub-demo@1.0.0/', token)).body, /version 1\.0\.0/, 'the earlier version\'s UI is still served')
  t.match((await browse(app, '/app-ui/pub-demo@2.0.0/', token)).body, /version 2\.0\.0/)

  const shown = await call('GET', '/api/v1/apps/pub-demo')
  t.equal(shown.statusCode, 200)
  t.same(shown.body.versions.map((v: { version: string }) => v.version), ['2.0.0', '1.0.0'], 'newest first; the broken one was never stored')
  t.match(shown.body, { activeVersion: '2.0.0', nodes: [{ nodeId: app.config.nodeId, version: '2.0.0', error: null }] })
  t.match((await call('GET', '/api/v1/apps')).body, { apps: [{ name: 'pub-demo', activeVersion: '2.0.0', versions: 2 }] })
  const metrics = await app.inject({ method: 'GET', url: '/metrics' })
  t.match(metrics.body, /^reaktor_published_apps_failing\{[^}]*\} 0$/m, 'no published app fails here')

  t.match(await call('POST', '/api/v1/apps/pub-demo/activate', { version: '1.0.0' }), { statusCode: 200, body: { previous: '2.0.0', changed: true } })
  t.same((await call('POST', '/api/v1/aktor/which', {})).body, { version: '1.0.0' }, 'rolled back')
  t.equal((await call('POST', '/api/v1/apps/pub-demo/activate', { version: '9.9.9' })).statusCode, 404)

  t.equal((await call('DELETE', '/api/v1/apps/pub-demo/versions/1.0.0')).statusCode, 409, 'the active version cannot be deleted')
  await call('POST', '/api/v1/apps/pub-demo/activate', { version: '2.0.0' })
  t.equal((await call('DELETE', '/api/v1/apps/pub-demo/versions/1.0.0')).statusCode, 200)
  await waitFor(async () => (await browse(app, '/app-ui/pub-demo@1.0.0/', token)).statusCode === 404, { what: 'the deleted version\'s UI gone' })

  // A node started afresh on this database, with nothing in its apps folder, runs the active version.
  const fresh = await build(t, { env: ADMIN_ENV, databaseUrl })
  const freshCall = apiAs(fresh, await loginToken(fresh))
  t.same((await freshCall('POST', '/api/v1/aktor/which', {})).body, { version: '2.0.0' })

  t.same((await folders()).map((e) => e.replace(/-[0-9a-f]{16}$/, '')), ['pub-demo@2.0.0'], 'the deleted version\'s folder is gone, the active one\'s stays')
  t.equal((await call('DELETE', '/api/v1/apps/pub-demo')).statusCode, 200)
  await waitFor(async () => (await folders()).length === 0, { what: 'the deleted app\'s folders gone' })
  t.equal((await call('GET', '/api/v1/apps/pub-demo')).statusCode, 404)
  t.equal((await call('POST', '/api/v1/aktor/which', {})).statusCode, 404, 'its aktors are gone')
  await waitFor(async () => (await freshCall('GET', '/api/v1/polling/pub-tick/status')).statusCode === 404, { what: 'the other node unlisting its reaktor' })
  const actions = (await app.db.selectFrom('audit').select('action').where('action', 'like', 'app.%').orderBy('id').execute()).map((r) => r.action)
  t.same(actions, ['app.publish', 'app.publish', 'app.activate', 'app.activate', 'app.delete_version', 'app.delete'])
})
