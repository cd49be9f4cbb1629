/**
 * Reading an uploaded app package: hostile archives are refused, each with its own message, and
 * an unpack that refuses leaves nothing behind, inside its folder or beside it; a real `npm pack`
 * reads back as it was packed.
 */
import t from 'tap'
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync } from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import { promisify } from 'node:util'
import { createGunzip, gzipSync } from 'node:zlib'
import { create, Header, Pax, types } from 'tar'
import { DEFAULT_PACKAGE_LIMITS, inspectPackage, PackageError, unpackPackage, type ExpectedPackage, type PackageLimits } from '../../src/apps/package-archive.js'
import { EXAMPLE_APPS_DIR } from '../helpers/paths.js'
import { tempDir } from '../helpers/temp-dir.js'

interface Entry {
  path: string
  type?: types.EntryTypeName
  body?: string | Buffer
  linkpath?: string
  mode?: number
  /** What the header says, when it is not the body's length. */
  size?: number
  /** The path in a pax header (which can hold what the ustar field cannot). */
  paxPath?: string
}

/** A tar written header by header: tar's create API refuses to write most of what is tested here. */
function tarOf (entries: Entry[]): Buffer {
  const blocks = entries.flatMap((entry) => {
    const body = Buffer.from(entry.body ?? '')
    const type = entry.type ?? 'File'
    const header = Buffer.alloc(512)
    new Header({
      path: entry.path, type, size: entry.size ?? body.length, linkpath: entry.linkpath ?? '',
      mode: entry.mode ?? (type === 'Directory' ? 0o755 : 0o644), uid: 0, gid: 0, mtime: new Date(0)
    }).encode(header)
    const pax = entry.paxPath === undefined ? [] : [new Pax({ path: entry.paxPath }).encode()]
    return [...pax, header, body, Buffer.alloc((512 - (body.length % 512)) % 512)]
  })
  return Buffer.concat([...blocks, Buffer.alloc(1024)])
}

const tgz = (entries: Entry[]): Buffer => gzipSync(tarOf(entries))
const manifest = (value: unknown): Entry => ({ path: 'package/package.json', body: typeof value === 'string' ? value : JSON.stringify(value) })
const MANIFEST = manifest({ name: 'demo', version: '1.0.0' })
const INDEX = { path: 'package/index.js', body: 'export const reaktors = []\n' }
const small = (limits: Partial<PackageLimits>): PackageLimits => ({ ...DEFAULT_PACKAGE_LIMITS, ...limits })

/** What JSON.parse says of `text`: its words differ between Node versions. */
function jsonError (text: string): string {
  try {
    JSON.parse(text)
  } catch (err) {
    return (err as Error).message
  }
  throw new Error(`${text} parses`)
}

async function refusal (promise: Promise<unknown>): Promise<PackageError | undefined> {
  try {
    await promise
  } catch (err) {
    if (err instanceof PackageError) return err
    throw err
  }
  return undefined
}

/** Every path under `dir`, relative to it, sorted. */
async function listing (dir: string): Promise<string[]> {
  return (await fs.readdir(dir, { recursive: true })).sort()
}

interface Hostile {
  name: string
  bytes: Buffer
  message: string
  limits?: PackageLimits
  expected?: ExpectedPackage
  statusCode?: number
}

const cutTar = tarOf([MANIFEST, { path: 'package/big.js', body: 'x'.repeat(2000) }])
const goodTgz = tgz([MANIFEST, INDEX])

const hostile: Hostile[] = [
  { name: 'a plain tar', bytes: tarOf([MANIFEST]), message: 'the package is not gzip-compressed: upload the .tgz that npm pack writes' },
  { name: 'gzip of no tar', bytes: gzipSync('not a tar archive, only text '.repeat(40)), message: 'the package is not a valid tar archive: upload the .tgz that npm pack writes' },
  { name: 'gzip cut short', bytes: goodTgz.subarray(0, goodTgz.length - 30), message: 'the package\'s gzip data is damaged or cut short: upload the .tgz that npm pack writes, whole' },
  { name: 'a tar cut short', bytes: gzipSync(cutTar.subarray(0, cutTar.length - 1024 - 1000)), message: 'the package\'s tar archive is cut short: upload the .tgz that npm pack writes, whole' },
  { name: 'gzip twice', bytes: gzipSync(goodTgz), message: 'the package is gzip-compressed twice: upload the .tgz that npm pack writes' },
  { name: 'an entry outside package/', bytes: tgz([MANIFEST, { path: 'other/index.js', body: 'x' }]), message: 'package entry "other/index.js" is not under package/: every entry of an npm package must be (upload the .tgz that npm pack writes)' },
  { name: 'an absolute path', bytes: tgz([MANIFEST, { path: '/tmp/evil.js', body: 'x' }]), message: 'package entry "/tmp/evil.js" is an absolute path: entries must be relative, under package/' },
  { name: 'a .. segment', bytes: tgz([MANIFEST, { path: 'package/../evil.js', body: 'x' }]), message: 'package entry "package/../evil.js" leads outside the package: entries must stay under package/' },
  { name: 'a deep .. segment', bytes: tgz([MANIFEST, { path: 'package/lib/../../../evil.js', body: 'x' }]), message: 'package entry "package/lib/../../../evil.js" leads outside the package: entries must stay under package/' },
  { name: 'a backslash', bytes: tgz([MANIFEST, { path: 'package\\..\\evil.js', body: 'x' }]), message: 'package entry "package\\\\..\\\\evil.js" holds a backslash: paths must use / only' },
  { name: 'a control character', bytes: tgz([MANIFEST, { path: 'package/a\nb.js', body: 'x' }]), message: 'package entry "package/a\\nb.js" holds a control character: names must be printable' },
  { name: 'a NUL in a pax path', bytes: tgz([MANIFEST, { path: 'package/a.js', paxPath: 'package/a\u0000/../../evil.js', body: 'x' }]), message: 'the package holds a name with a NUL character (in an extended tar header): names must be printable' },
  { name: 'a NUL in a long name', bytes: tgz([MANIFEST, { path: '././@LongLink', type: 'NextFileHasLongPath', body: 'package/a.js\u0000/../../evil.js\u0000' }, { path: 'package/a.js', body: 'x' }]), message: 'the package holds a name with a NUL character (in an extended tar header): names must be printable' },
  { name: 'a pax header too large', bytes: tgz([MANIFEST, { path: 'package/a.js', paxPath: `package/${'a'.repeat(70_000)}.js`, body: 'x' }]), message: 'the package holds an extended tar header of 68.4 KiB: at most 64 KiB is allowed' },
  { name: 'an empty segment', bytes: tgz([MANIFEST, { path: 'package//index.js', body: 'x' }]), message: 'package entry "package//index.js" has an empty or "." segment: each path must be written plainly (upload the .tgz that npm pack writes)' },
  { name: 'a name too long to write', bytes: tgz([MANIFEST, { path: 'package/a.js', paxPath: `package/${'a'.repeat(253)}.js`, body: 'x' }]), message: `package entry "package/${'a'.repeat(253)}.js" has a name part of more than 255 bytes: file systems allow at most 255` },
  { name: 'a symbolic link out', bytes: tgz([MANIFEST, { path: 'package/passwd', type: 'SymbolicLink', linkpath: '../../../etc/passwd' }]), message: 'symbolic link "package/passwd" to "../../../etc/passwd" leads outside the package: links must point inside package/' },
  { name: 'an absolute symbolic link', bytes: tgz([MANIFEST, { path: 'package/passwd', type: 'SymbolicLink', linkpath: '/etc/passwd' }]), message: 'symbolic link "package/passwd" to "/etc/passwd" is absolute: links must point inside the package with a relative path' },
  {
    // Each link alone stays inside; the second climbs out through the first (`p` is package/ itself).
    name: 'a symbolic link out through another',
    bytes: tgz([MANIFEST, { path: 'package/q', type: 'SymbolicLink', linkpath: 'p/..' }, { path: 'package/p', type: 'SymbolicLink', linkpath: '.' }]),
    message: 'symbolic link "package/q" to "p/.." leads outside the package through another link: links must point inside package/'
  },
  {
    name: 'a loop of links',
    bytes: tgz([MANIFEST, { path: 'package/a', type: 'SymbolicLink', linkpath: 'b' }, { path: 'package/b', type: 'SymbolicLink', linkpath: 'a' }]),
    message: 'symbolic link "package/a" to "b" goes round a loop of links: a link must lead to a path'
  },
  { name: 'a hard link out', bytes: tgz([MANIFEST, { path: 'package/passwd', type: 'Link', linkpath: '/etc/passwd' }]), message: 'hard link "package/passwd" to "/etc/passwd" is an absolute path: entries must be relative, under package/' },
  { name: 'a hard link to nothing before it', bytes: tgz([MANIFEST, { path: 'package/a.js', type: 'Link', linkpath: 'package/b.js' }, { path: 'package/b.js', body: 'x' }]), message: 'hard link "package/a.js" to "package/b.js" names no file before it: a hard link must name a file of the package that comes earlier in the archive' },
  { name: 'a character device', bytes: tgz([MANIFEST, { path: 'package/null', type: 'CharacterDevice' }]), message: 'package entry "package/null" is an entry of type CharacterDevice: only files, folders and links are allowed' },
  { name: 'a block device', bytes: tgz([MANIFEST, { path: 'package/sda', type: 'BlockDevice' }]), message: 'package entry "package/sda" is an entry of type BlockDevice: only files, folders and links are allowed' },
  { name: 'a FIFO', bytes: tgz([MANIFEST, { path: 'package/pipe', type: 'FIFO' }]), message: 'package entry "package/pipe" is an entry of type FIFO: only files, folders and links are allowed' },
  { name: 'a contiguous file', bytes: tgz([MANIFEST, { path: 'package/c.js', type: 'ContiguousFile', body: 'x' }]), message: 'package entry "package/c.js" is an entry of type ContiguousFile: only files, folders and links are allowed' },
  { name: 'a path twice', bytes: tgz([MANIFEST, INDEX, INDEX]), message: 'package entry "package/index.js" appears twice: each path may appear once' },
  { name: 'a folder, then a file of its name', bytes: tgz([MANIFEST, { path: 'package/lib/', type: 'Directory' }, { path: 'package/lib', body: 'x' }]), message: 'package entry "package/lib" appears once as a folder and once as a file: each path may appear once' },
  { name: 'a file, then a file inside it', bytes: tgz([MANIFEST, { path: 'package/lib', body: 'x' }, { path: 'package/lib/a.js', body: 'x' }]), message: 'package entry "package/lib/a.js" lies inside "package/lib", which is a file: each path may appear once, as one kind' },
  { name: 'a link, then a file through it', bytes: tgz([MANIFEST, { path: 'package/lib', type: 'SymbolicLink', linkpath: '.' }, { path: 'package/lib/a.js', body: 'x' }]), message: 'package entry "package/lib/a.js" lies inside "package/lib", which is a link: each path may appear once, as one kind' },
  { name: 'no package.json', bytes: tgz([INDEX]), message: 'the package has no package/package.json: an app package needs one (upload the .tgz that npm pack writes)' },
  { name: 'package.json a link', bytes: tgz([{ path: 'package/real.json', body: '{}' }, { path: 'package/package.json', type: 'SymbolicLink', linkpath: 'real.json' }]), message: 'package/package.json is not a file: it must be a plain file, not a link or a folder' },
  { name: 'package.json not JSON', bytes: tgz([manifest('{ name: demo }')]), message: `package/package.json is not valid JSON (${jsonError('{ name: demo }')}): it must hold a JSON object` },
  { name: 'package.json an array', bytes: tgz([manifest([{ name: 'demo', version: '1.0.0' }])]), message: 'package/package.json does not hold a JSON object: it must, with a "name" and a "version"' },
  { name: 'package.json without a name', bytes: tgz([manifest({ version: '1.0.0' })]), message: 'package/package.json has no "name": it needs one (for example "my-app" or "@acme/widgets")' },
  { name: 'package.json without a version', bytes: tgz([manifest({ name: 'demo', version: 1 })]), message: 'package/package.json of demo has no "version": it needs one (for example "1.0.0")' },
  { name: 'an invalid name', bytes: tgz([manifest({ name: '../Demo', version: '1.0.0' })]), message: 'package/package.json name "../Demo" is not a valid package name: lower case letters, digits, - . _ ~, optionally @scope/' },
  { name: 'an invalid version', bytes: tgz([manifest({ name: 'demo', version: '1.0.0/../x' })]), message: 'package/package.json version "1.0.0/../x" is not valid: letters, digits, . + _ - only' },
  { name: 'over maxBytes', bytes: goodTgz, limits: small({ maxBytes: 100 }), statusCode: 413, message: `the package is ${goodTgz.length} bytes: at most 100 bytes is allowed` },
  { name: 'more entries than maxEntries', bytes: tgz([MANIFEST, INDEX, { path: 'package/a.js' }, { path: 'package/b.js' }]), limits: small({ maxEntries: 3 }), message: 'the package has more than 3 entries: at most 3 are allowed' },
  { name: 'a header that promises too much', bytes: tgz([MANIFEST, { path: 'package/big.bin', size: 8 * 1024 ** 3 - 1 }]), message: 'the package unpacks to more than 256 MiB: at most 256 MiB unpacked is allowed' },
  { name: 'a name other than expected', bytes: goodTgz, expected: { name: 'other' }, message: 'the package is demo@1.0.0, but it was uploaded as other: the name in package.json must match' },
  { name: 'a version other than expected', bytes: goodTgz, expected: { name: 'demo', version: '1.0.1' }, message: 'the package is demo@1.0.0, but it was uploaded as version 1.0.1: the version in package.json must match' }
]

for (const c of hostile) {
  t.test(`refused: ${c.name}`, async (t) => {
    const inspected = await refusal(inspectPackage(c.bytes, c.limits, c.expected))
    t.equal(inspected?.message, c.message, 'inspectPackage refuses with the message')
    t.equal(inspected?.statusCode, c.statusCode ?? 400)
    t.equal(inspected?.code, 'REAKTOR_PACKAGE')
    if (c.expected !== undefined) return
    // Deep enough that whatever climbs out of dest still lands in the sandbox, where it would show.
    const sandbox = await tempDir(t, 'reaktor-package-')
    const dest = path.join(sandbox, 'a', 'b', 'dest')
    const unpacked = await refusal(unpackPackage(c.bytes, dest, c.limits))
    t.equal(unpacked?.message, c.message, 'unpackPackage refuses with the same message')
    t.notOk(existsSync(dest), 'dest is removed')
    t.same(await listing(sandbox), ['a', path.join('a', 'b')], 'nothing was written beside dest')
  })
}

t.test('refused after files were written: what was written is removed with dest', async (t) => {
  const sandbox = await tempDir(t, 'reaktor-package-')
  const dest = path.join(sandbox, 'dest')
  const many = Array.from({ length: 50 }, (_, i) => ({ path: `package/lib/f${i}.js`, body: 'x'.repeat(20_000) }))
  const err = await refusal(unpackPackage(tgz([MANIFEST, ...many, { path: 'package/lib/f3.js', body: 'y' }]), dest))
  t.equal(err?.message, 'package entry "package/lib/f3.js" appears twice: each path may appear once')
  t.same(await listing(sandbox), [])
})

t.test('a gzip bomb is refused as soon as it inflates past the limit, not inflated to its end', async (t) => {
  // A small valid package, then 256 MiB of zeros after its end: members of 16 MiB, concatenated.
  const zeros = gzipSync(Buffer.alloc(16 * 1024 * 1024), { level: 9 })
  const bomb = Buffer.concat([goodTgz, ...Array<Buffer>(16).fill(zeros)])
  const limits = small({ maxUnpackedBytes: 1024 * 1024 })
  const settled: string[] = []
  const plainGunzip = new Promise<void>((resolve, reject) => {
    const gunzip = createGunzip().on('data', () => {}).on('end', resolve).on('error', reject)
    gunzip.end(bomb)
  }).then(() => settled.push('plain gunzip'))
  const err = await refusal(inspectPackage(bomb, limits))
  settled.push('refusal')
  t.equal(err?.message, 'the package unpacks to more than 1 MiB: at most 1 MiB unpacked is allowed')
  await plainGunzip
  t.same(settled, ['refusal', 'plain gunzip'], 'refused long before the bomb is inflated whole')
})

t.test('the limits by default', async (t) => {
  t.same(DEFAULT_PACKAGE_LIMITS, { maxBytes: 64 * 1024 * 1024, maxUnpackedBytes: 256 * 1024 * 1024, maxEntries: 20_000 })
})

t.test('unpacking into a folder that exists is refused, and the folder is left alone', async (t) => {
  const dest = await tempDir(t, 'reaktor-package-')
  await fs.writeFile(path.join(dest, 'keep'), 'x')
  await t.rejects(unpackPackage(goodTgz, dest), { message: `cannot unpack a package into ${dest}: it exists already; unpack into a new folder` })
  t.same(await listing(dest), ['keep'])
})

/** What a tree holds: each path with its kind, mode, and content or link target. */
async function tree (dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  for (const rel of await listing(dir)) {
    const full = path.join(dir, rel)
    const stat = await fs.lstat(full)
    const mode = (stat.mode & 0o777).toString(8)
    if (stat.isSymbolicLink()) out[rel] = `link -> ${await fs.readlink(full)}`
    else if (stat.isDirectory()) out[rel] = `folder ${mode}`
    else out[rel] = `file ${mode} ${createHash('sha256').update(await fs.readFile(full)).digest('hex').slice(0, 12)}`
  }
  return out
}

t.test('npm pack of reaktor-apps/drain-demo: inspected and unpacked as packed', async (t) => {
  const dir = await tempDir(t, 'reaktor-package-')
  const source = path.join(dir, 'drain-demo')
  await fs.cp(path.join(EXAMPLE_APPS_DIR, 'drain-demo'), source, { recursive: true })
  await promisify(execFile)('npm', ['pack', '--pack-destination', dir, '--silent'], { cwd: source })
  const bytes = await fs.readFile(path.join(dir, 'drain-demo-1.0.0.tgz'))
  const stats = await Promise.all((await listing(source)).map(async (rel) => ({ rel, stat: await fs.stat(path.join(source, rel)) })))
  const files = stats.filter(({ stat }) => stat.isFile())

  const inspected = await inspectPackage(bytes, undefined, { name: 'drain-demo', version: '1.0.0' })
  t.same(inspected, {
    name: 'drain-demo',
    version: '1.0.0',
    manifest: JSON.parse(await fs.readFile(path.join(source, 'package.json'), 'utf8')),
    sha256: createHash('sha256').update(bytes).digest('hex'),
    size: bytes.length,
    unpackedSize: files.reduce((sum, { stat }) => sum + stat.size, 0),
    entries: files.length
  })
  t.ok(files.some(({ rel }) => rel === path.join('public', '.service-external-resources.json')), 'dot files are packed and counted')

  const dest = path.join(dir, 'unpacked')
  t.same(await unpackPackage(bytes, dest), inspected, 'unpacking finds what inspecting found')
  t.same(await tree(dest), await tree(source), 'the files, folders and modes of the app folder')
})

t.test('a package tar writes from a folder: folders, modes, links inside and hard links unpacked', async (t) => {
  const dir = await tempDir(t, 'reaktor-package-')
  const pkg = path.join(dir, 'package')
  await fs.mkdir(path.join(pkg, 'lib', 'deep'), { recursive: true })
  await fs.mkdir(path.join(pkg, 'node_modules', '.bin'), { recursive: true })
  await fs.writeFile(path.join(pkg, 'package.json'), JSON.stringify({ name: '@acme/widgets', version: '2.0.0-beta.1', main: 'lib/index.js' }))
  await fs.writeFile(path.join(pkg, 'lib', 'index.js'), 'export const reaktors = []\n', { mode: 0o600 })
  await fs.writeFile(path.join(pkg, 'lib', 'deep', 'cli.js'), '#!/usr/bin/env node\n', { mode: 0o700 })
  await fs.symlink('../../lib/deep/cli.js', path.join(pkg, 'node_modules', '.bin', 'cli'))
  await fs.link(path.join(pkg, 'lib', 'index.js'), path.join(pkg, 'lib', 'same.js'))
  await fs.chmod(path.join(pkg, 'lib'), 0o700)
  const bytes = await create({ gzip: true, cwd: dir, portable: true }, ['package']).concat()

  const inspected = await inspectPackage(bytes)
  const manifestSize = (await fs.stat(path.join(pkg, 'package.json'))).size
  // Five folders (package/ too), three files, a hard link (no bytes of its own) and a symbolic link.
  t.match(inspected, { name: '@acme/widgets', version: '2.0.0-beta.1', entries: 10, unpackedSize: manifestSize + 27 + 20 })
  const dest = path.join(dir, 'unpacked')
  await unpackPackage(bytes, dest)
  t.same(await tree(dest), {
    lib: 'folder 755',
    [path.join('lib', 'deep')]: 'folder 755',
    [path.join('lib', 'deep', 'cli.js')]: (await tree(pkg))[path.join('lib', 'deep', 'cli.js')].replace('700', '755'),
    [path.join('lib', 'index.js')]: (await tree(pkg))[path.join('lib', 'index.js')].replace('600', '644'),
    [path.join('lib', 'same.js')]: (await tree(pkg))[path.join('lib', 'index.js')].replace('600', '644'),
    node_modules: 'folder 755',
    [path.join('node_modules', '.bin')]: 'folder 755',
    [path.join('node_modules', '.bin', 'cli')]: 'link -> ../../lib/deep/cli.js',
    'package.json': (await tree(pkg))['package.json']
  })
  const [a, b] = await Promise.all(['index.js', 'same.js'].map(async (f) => await fs.stat(path.join(dest, 'lib', f))))
  t.equal(a.ino, b.ino, 'a hard link stays one file')
  t.equal((await fs.stat(dest)).mode & 0o777, 0o755)
})
