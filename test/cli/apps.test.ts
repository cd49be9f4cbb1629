/**
 * `reaktor apps …` against a listening service: publishing real `npm pack` output (a folder the
 * command packs itself, the current one by default, and a .tgz), list and show, activate, rollback
 * and delete, and the service's refusals as exit codes: an unknown app (3), other bytes under a
 * published version and a package that would not load (1), no earlier version to roll back to (1),
 * the active version's deletion (1), a bad name or version (2, nothing sent).
 */
import { execFile } from 'node:child_process'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { main } from '../../src/cli/main.js'
import { formatBytes, splitAppSpec } from '../../src/cli/commands/published-apps.js'
import { apiAs } from '../helpers/auth.js'
import { runCli, runCliInProcess, terminal, type CliResult } from '../helpers/cli.js'
import { cliService, type CliService } from '../helpers/cli-service.js'
import { tempDir } from '../helpers/temp-dir.js'
import type { TestContext } from '../helpers/test-context.js'

const run = promisify(execFile)
const NAME = '@acme/cli-demo'

/** An app folder whose aktor `cli-which` answers its version; `extra` is appended to index.js. */
async function appFolder (t: TestContext, version: string, extra = ''): Promise<string> {
  const dir = await tempDir(t, 'cli-app-')
  await fs.writeFile(path.join(dir, 'package.json'), JSON.stringify({ name: NAME, version, type: 'module', main: 'index.js' }))
  await fs.writeFile(path.join(dir, 'index.js'), `export const reaktors = [{ reaktorDefinitionId: 'cli-which', createReaktor: () => async () => ({ version: '${version}' }) }]\n${extra}`)
  return dir
}

/** `reaktor <args>` in this process, with PATH and HOME for the npm it runs to pack a folder. */
function inProcess (s: CliService): (args: string[]) => Promise<CliResult> {
  const env = { XDG_CONFIG_HOME: s.home, REAKTOR_URL: s.base, REAKTOR_TOKEN: s.admin, PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? os.homedir() }
  return async (args) => await runCliInProcess(args, { env })
}

async function activeAnswer (s: CliService): Promise<unknown> {
  return (await apiAs(s.app, s.admin)('POST', '/api/v1/aktor/cli-which', {})).body
}

t.test('name@version: the version follows the last @ that does not start the name', async (t) => {
  t.same(splitAppSpec('my-app'), { name: 'my-app' })
  t.same(splitAppSpec('my-app@1.2.0'), { name: 'my-app', version: '1.2.0' })
  t.same(splitAppSpec('@acme/widgets'), { name: '@acme/widgets' })
  t.same(splitAppSpec('@acme/widgets@1.2.0-rc.1+b7'), { name: '@acme/widgets', version: '1.2.0-rc.1+b7' })
  t.throws(() => splitAppSpec('@acme/widgets@'), /"" is not an app version/)
  t.throws(() => splitAppSpec('my-app@1.0@2.0'), /"my-app@1\.0" is not an app name/)
  t.throws(() => splitAppSpec('My App'), /is not an app name/)
  t.same([1000, 2048, 5 * 1024 * 1024].map(formatBytes), ['1000 B', '2.0 KiB', '5.0 MiB'])
})

t.test('publish, list, show, activate, rollback and delete, with the refusals of each', async (t) => {
  const s = await cliService(t)
  const cli = inProcess(s)
  const [v1, v1Other, broken, v2, noManifest, packTmp] = await Promise.all([
    appFolder(t, '1.0.0'),
    appFolder(t, '1.0.0', '// other bytes\n'),
    appFolder(t, '3.0.0', 'export const broken = (1,\nexport const x = 2\n'),
    appFolder(t, '2.0.0'),
    tempDir(t, 'cli-empty-'),
    tempDir(t, 'cli-pack-tmp-')
  ])
  // 2.0.0 as a .tgz that npm pack wrote, published as a file.
  const { stdout: packed } = await run('npm', ['pack', '--silent', '--pack-destination', v2], { cwd: v2 })
  const v2Tarball = path.join(v2, packed.trim().split('\n').pop()!)

  const empty = await cli(['apps', 'list'])
  t.same(empty, { code: 0, stdout: '(none)\n', stderr: '' }, 'no app published yet')

  // The current folder by default, packed into a temporary folder that is removed after: as a
  // process, in the app's folder, with a TMPDIR of the test's to look into.
  const first = await runCli(['apps', 'publish'], { cwd: v1, env: { REAKTOR_URL: s.base, REAKTOR_TOKEN: s.admin, XDG_CONFIG_HOME: s.home, TMPDIR: packTmp } })
  t.equal(first.code, 0, first.stderr)
  t.match(first.stdout, /^Published @acme\/cli-demo@1\.0\.0 \(\d+(\.\d)? (B|KiB), sha256 [0-9a-f]{12}\) and activated it \(the app's first active version\): every node switches to it\.\n$/)
  // Only the command's own folder counts: tsx (running its TypeScript) and Node 24's compile cache keep theirs there too.
  t.same((await fs.readdir(packTmp)).filter((f) => f.startsWith('reaktor-pack-')), [], 'the temporary tarball and its folder are removed')
  t.same((await fs.readdir(v1)).sort(), ['index.js', 'package.json'], 'nothing written into the app folder')
  t.same(await activeAnswer(s), { version: '1.0.0' }, 'the service runs it')

  const [again, otherBytes, wontLoad, stored] = await Promise.all([
    cli(['apps', 'publish', v1]),
    cli(['apps', 'publish', v1Other]),
    cli(['apps', 'publish', broken]),
    cli(['apps', 'publish', v2Tarball, '--no-activate'])
  ])
  t.equal(again.code, 0, again.stderr)
  t.match(again.stdout, /^@acme\/cli-demo@1\.0\.0 is already published with these bytes \(.*\); nothing changed \(it is the active version\)\.\n$/)
  t.equal(otherBytes.code, 1, 'other bytes under a published version: a conflict (409)')
  t.match(otherBytes.stderr, /^reaktor: App @acme\/cli-demo@1\.0\.0 is already published with other contents \(sha256 [0-9a-f]{12}…\); versions are immutable: publish a new version\n$/)
  t.equal(wontLoad.code, 1, 'a package that would not load (422)')
  t.match(wontLoad.stderr, /^reaktor: The package would not load: app @acme\/cli-demo@3\.0\.0: entry module "index\.js" failed to import: SyntaxError at index\.js:3:1/)
  t.equal(stored.code, 0, stored.stderr)
  t.match(stored.stdout, /^Stored @acme\/cli-demo@2\.0\.0 \(.*\) without activating it \(the active version is 1\.0\.0\)\. To activate it: reaktor apps activate @acme\/cli-demo 2\.0\.0\n$/)
  for (const r of [otherBytes, wontLoad]) t.equal(r.stdout, '', 'nothing on stdout')
  t.same(await activeAnswer(s), { version: '1.0.0' }, '--no-activate left the active version')

  const [list, listJson, shown, shownJson] = await Promise.all([cli(['apps', 'list']), cli(['--json', 'apps', 'list']), cli(['apps', 'show', NAME]), cli(['--json', 'apps', 'show', NAME])])
  const listLines = list.stdout.trimEnd().split('\n')
  t.match(listLines[0], /^NAME +ACTIVE +VERSIONS +CHANGED +CHANGED BY$/)
  t.match(listLines.slice(1), [/^@acme\/cli-demo +1\.0\.0 +2 +\d{4}-\d\d-\d\dT\S+Z +alice$/])
  t.match(JSON.parse(listJson.stdout), { apps: [{ name: NAME, activeVersion: '1.0.0', versions: 2, changedBy: 'alice' }] })
  const details = JSON.parse(shownJson.stdout)
  t.same(details, (await apiAs(s.app, s.admin)('GET', `/api/v1/apps/${encodeURIComponent(NAME)}`)).body, '--json: the API answer')
  t.equal(shown.code, 0, shown.stderr)
  const [fields, versions, nodes] = shown.stdout.split('\n\n')
  t.match(fields, /^name: +@acme\/cli-demo\nactive: +1\.0\.0\nchanged: +\S+Z\nchanged by: +alice$/)
  const [v2Row, v1Row] = details.versions as Array<{ sha256: string, size: number }>
  t.match(versions.split('\n'), [
    'Versions, newest first:',
    /^VERSION +ACTIVE +SIZE +SHA256 +PUBLISHED +BY$/,
    new RegExp(`^2\\.0\\.0 +- +${formatBytes(v2Row.size).replace('.', '\\.')} +${v2Row.sha256.slice(0, 12)} +\\S+Z +alice$`),
    new RegExp(`^1\\.0\\.0 +active +${formatBytes(v1Row.size).replace('.', '\\.')} +${v1Row.sha256.slice(0, 12)} +\\S+Z +alice$`)
  ], 'newest first, the active one marked')
  t.match(nodes.trimEnd().split('\n'), ['Nodes:', /^NODE +VERSION +SINCE +ERROR$/, /^test-node +1\.0\.0 +\S+Z +-$/])

  t.match(await cli(['apps', 'rollback', NAME]), { code: 1, stdout: '', stderr: /@acme\/cli-demo@1\.0\.0 is the oldest published version of the app: there is no earlier version to roll back to/ })
  const activated = await cli(['apps', 'activate', NAME, '2.0.0'])
  t.same(activated, { code: 0, stdout: 'Activated @acme/cli-demo@2.0.0 (it replaces 1.0.0): every node switches to it.\n', stderr: '' })
  t.same(await activeAnswer(s), { version: '2.0.0' })
  t.match(await cli(['apps', 'activate', NAME, '2.0.0']), { code: 0, stdout: '@acme/cli-demo@2.0.0 is already the active version: nothing changed.\n' })
  t.match(await cli(['apps', 'activate', NAME, '9.9.9']), { code: 3, stderr: /App @acme\/cli-demo has no version 9\.9\.9; its versions, newest first: 2\.0\.0, 1\.0\.0/ })
  t.match(await cli(['apps', 'delete', `${NAME}@2.0.0`]), { code: 1, stderr: /App @acme\/cli-demo@2\.0\.0 is active; activate another version first, or delete the app/ })

  const rolledBack = await cli(['--json', 'apps', 'rollback', NAME])
  t.match(JSON.parse(rolledBack.stdout), { name: NAME, version: '1.0.0', previous: '2.0.0', changed: true, thisNode: { version: '1.0.0', error: null } }, 'the version published before the active one')
  t.same(await activeAnswer(s), { version: '1.0.0' })
  t.same(await cli(['apps', 'delete', `${NAME}@2.0.0`]), { code: 0, stdout: 'App @acme/cli-demo@2.0.0 deleted\n', stderr: '' })
  t.match(await cli(['apps', 'rollback', NAME]), { code: 1, stderr: /no earlier version to roll back to/ }, 'the version before it is gone')

  // The whole app: asked first. Without a terminal, --yes is needed; at one, "n" keeps it.
  t.match(await cli(['apps', 'delete', NAME]), { code: 2, stderr: /Delete app "@acme\/cli-demo" and every version of it \(every node stops and unlists its reaktors\): no terminal to ask on; add --yes to confirm/ })
  const env = { REAKTOR_URL: s.base, REAKTOR_TOKEN: s.admin, XDG_CONFIG_HOME: s.home }
  const no = terminal(env, 'n')
  t.equal(await main(['apps', 'delete', NAME], no.io), 1, 'no: not deleted')
  t.equal(no.stderr(), 'Delete app "@acme/cli-demo" and every version of it (every node stops and unlists its reaktors)? [y/N] n\nreaktor: app "@acme/cli-demo" not deleted\n')
  t.same(await activeAnswer(s), { version: '1.0.0' }, 'still there')
  const yes = terminal(env, 'y')
  t.equal(await main(['apps', 'delete', NAME], yes.io), 0, yes.stderr())
  t.equal(yes.stdout(), 'App @acme/cli-demo deleted (1 version)\n')
  t.match(await cli(['apps', 'show', NAME]), { code: 3, stdout: '', stderr: 'reaktor: No app named @acme/cli-demo is published\n' })

  // Refused before anything is sent (2), or by the service: unknown (3), not a package (400: 2).
  const notPackage = path.join(noManifest, 'notes.txt')
  await fs.writeFile(notPackage, 'not a tarball\n')
  const badManifest = path.join(noManifest, 'bad-manifest')
  await fs.mkdir(badManifest)
  await fs.writeFile(path.join(badManifest, 'package.json'), '{ "name": ')
  const cases: Array<[string[], number, RegExp]> = [
    [['apps', 'show', 'nope'], 3, /No app named nope is published/],
    [['apps', 'rollback', 'nope'], 3, /No app named nope is published/],
    [['apps', 'activate', 'nope', '1.0.0'], 3, /No app named nope is published/],
    [['apps', 'delete', 'nope@1.0.0'], 3, /No app named nope is published/],
    [['apps', 'delete', 'nope', '--yes'], 3, /No app named nope is published/],
    [['apps', 'show', 'Not An App'], 2, /"Not An App" is not an app name/],
    [['apps', 'activate', NAME, '../1'], 2, /"\.\.\/1" is not an app version/],
    [['apps', 'delete', `${NAME}@`, '--yes'], 2, /"" is not an app version/],
    [['apps', 'publish', path.join(noManifest, 'missing')], 3, /missing does not exist: give an app folder/],
    [['apps', 'publish', noManifest], 2, /is not an app folder \(no package\.json\)/],
    [['apps', 'publish', notPackage], 2, /^reaktor: the package is not gzip-compressed: upload the \.tgz that npm pack writes\n$/],
    [['apps', 'publish', badManifest], 1, /^reaktor: npm pack in \S+ exited with code \d+; nothing was published\. Its output:\n[^]*package\.json/],
    [['apps', 'frobnicate'], 2, /unknown command/]
  ]
  const results = await Promise.all(cases.map(async ([args]) => await cli(args)))
  cases.forEach(([args, code, message], i) => {
    t.equal(results[i].code, code, `reaktor ${args.join(' ')} exits ${code}`)
    t.match(results[i].stderr, message, `reaktor ${args.join(' ')}: ${results[i].stderr.trim()}`)
    t.equal(results[i].stdout, '', 'nothing on stdout')
  })
  t.same((await apiAs(s.app, s.admin)('GET', '/api/v1/apps')).body, { apps: [] }, 'nothing was published by the refused calls')
})

t.test('help: the apps group in the CLI\'s help, its commands in its own', async (t) => {
  const [top, group, publish] = await Promise.all([['--help'], ['apps', '--help'], ['apps', 'publish', '--help']].map(async (args) => await runCliInProcess(args)))
  t.match(top.stdout, /^ {2}apps +apps published to the service/m)
  for (const command of ['list', 'show', 'publish', 'activate', 'rollback', 'delete']) t.match(group.stdout, new RegExp(`^ {2}${command}\\b`, 'm'), command)
  t.match(publish.stdout, /--no-activate/)
  t.match(publish.stdout, /\$ reaktor apps publish my-app-1\.2\.0\.tgz/)
})
