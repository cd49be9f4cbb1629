import { createHash } from 'node:crypto'
import fs from 'node:fs/promises'
import path from 'node:path'
import { Readable } from 'node:stream'
import { createGunzip } from 'node:zlib'
import { Parser, type ReadEntry } from 'tar'
import { isPackageName, isPackageVersion } from './loader.js'
import { DiskWriter, type Sink } from './package-writer.js'

/**
 * Reading an uploaded app package: the .tgz `npm pack` writes, every entry under `package/`.
 * Everything is checked while the archive streams, before anything of an entry is written, and
 * nothing is trusted to tar's defaults: an upload is hostile until it has passed every check.
 */

export interface PackageLimits {
  /** The package as uploaded (gzip). */
  maxBytes: number
  /**
   * The archive inflated (its files, tar's headers, anything after its end): a gzip bomb stops
   * here. A header that announces more file bytes than this is refused before they are inflated.
   */
  maxUnpackedBytes: number
  maxEntries: number
}

const MiB = 1024 * 1024
export const DEFAULT_PACKAGE_LIMITS: PackageLimits = { maxBytes: 64 * MiB, maxUnpackedBytes: 256 * MiB, maxEntries: 20_000 }
/** package.json is read whole into memory and parsed: it is metadata, not a payload. */
const MAX_MANIFEST_BYTES = MiB
/** An extended (pax) header holds a long name or link target, not a payload. */
const MAX_META_BYTES = 64 * 1024
/** As many links as Linux follows in one path before giving up (ELOOP). */
const MAX_LINK_HOPS = 40
/** The upload goes to gunzip a slice at a time: a refusal leaves the rest of it uninflated. */
const SLICE_BYTES = 64 * 1024

/** An uploaded package refused: the message names what was wrong and what is allowed. */
export class PackageError extends Error {
  readonly code = 'REAKTOR_PACKAGE'
  readonly statusCode: number
  constructor (message: string, statusCode = 400) {
    super(message)
    this.name = 'PackageError'
    this.statusCode = statusCode
  }
}

export interface InspectedPackage {
  name: string
  version: string
  manifest: Record<string, unknown>
  /** Hex SHA-256 of the package's bytes as uploaded. */
  sha256: string
  size: number
  /** The bytes of its files (as `npm pack` counts them: a hard link adds none). */
  unpackedSize: number
  entries: number
}

export interface ExpectedPackage { name?: string, version?: string }

function bytes (n: number): string {
  if (n >= MiB) return `${Number.isInteger(n / MiB) ? n / MiB : (n / MiB).toFixed(1)} MiB`
  if (n >= 1024) return `${Number.isInteger(n / 1024) ? n / 1024 : (n / 1024).toFixed(1)} KiB`
  return `${n} bytes`
}

const UPLOAD = 'upload the .tgz that npm pack writes'
const quoted = (p: string): string => JSON.stringify(p)

// ---------------------------------------------------------------- names of entries

type Kind = 'file' | 'dir' | 'link'

/**
 * The path of an entry below `package/` ('' for `package/` itself), or the refusal of a name that
 * could land anywhere else: absolute, `..`, backslashes (a folder separator on Windows), control
 * characters, or anything but one plain path under `package/`.
 */
function packagePath (name: string, what = 'package entry'): string {
  const shown = `${what} ${quoted(name)}`
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(name)) throw new PackageError(`${shown} holds a control character: names must be printable`)
  if (name.includes('\\')) throw new PackageError(`${shown} holds a backslash: paths must use / only`)
  if (name.startsWith('/') || /^[a-zA-Z]:/.test(name)) throw new PackageError(`${shown} is an absolute path: entries must be relative, under package/`)
  const segments = name.replace(/\/$/, '').split('/')
  if (segments.includes('..')) throw new PackageError(`${shown} leads outside the package: entries must stay under package/`)
  if (segments[0] !== 'package') throw new PackageError(`${shown} is not under package/: every entry of an npm package must be (${UPLOAD})`)
  if (segments.some((s) => s === '' || s === '.')) throw new PackageError(`${shown} has an empty or "." segment: each path must be written plainly (${UPLOAD})`)
  if (segments.some((s) => Buffer.byteLength(s) > 255)) throw new PackageError(`${shown} has a name part of more than 255 bytes: file systems allow at most 255`)
  return segments.slice(1).join('/')
}

/** The folders above `rel`, the outermost first. */
function parentsOf (rel: string): string[] {
  const segments = rel.split('/')
  return segments.slice(1).map((_, i) => segments.slice(0, i + 1).join('/'))
}

/**
 * Where a symbolic link at `from` leads, resolved as the file system will (through the package's
 * other links): 'outside' as soon as it climbs above the package, 'loop' when links never end.
 */
function linkDestination (from: string, links: Map<string, string>): 'inside' | 'outside' | 'loop' {
  const at = from.split('/').slice(0, -1)
  const left = links.get(from)!.split('/')
  let hops = 0
  while (left.length > 0) {
    const segment = left.shift()!
    if (segment === '' || segment === '.') continue
    if (segment === '..') {
      if (at.pop() === undefined) return 'outside'
      continue
    }
    at.push(segment)
    const target = links.get(at.join('/'))
    if (target === undefined) continue
    if (++hops > MAX_LINK_HOPS) return 'loop'
    at.pop()
    left.unshift(...target.split('/'))
  }
  return 'inside'
}

// ---------------------------------------------------------------- reading

interface Manifest { name: string, version: string, manifest: Record<string, unknown> }

class PackageReader {
  entries = 0
  unpackedSize = 0
  inflated = 0
  manifestText: string | undefined
  /** Every path seen, with its kind ('dir' also for a folder only implied by a deeper entry). */
  readonly kinds = new Map<string, Kind>()
  readonly explicitDirs = new Set<string>()
  readonly symlinks = new Map<string, string>()
  readonly hardLinks: Array<{ rel: string, target: string }> = []
  /** The regular files (hard links not), with the mode each gets. */
  readonly files = new Map<string, number>()

  constructor (private readonly limits: PackageLimits, private readonly sink: Sink | undefined) {}

  /** Checks one entry (its header: nothing of its body is read yet) and hands it on. */
  entry (entry: ReadEntry): void {
    if (++this.entries > this.limits.maxEntries) {
      throw new PackageError(`the package has more than ${this.limits.maxEntries} entries: at most ${this.limits.maxEntries} are allowed`)
    }
    const type = entry.type
    if (!['File', 'OldFile', 'Directory', 'SymbolicLink', 'Link'].includes(type)) throw unsupported(entry)
    const rel = packagePath(entry.path)
    const kind: Kind = type === 'Directory' ? 'dir' : type === 'SymbolicLink' ? 'link' : 'file'
    if (rel === '' && kind !== 'dir') throw new PackageError(`package entry ${quoted(entry.path)} is not a folder: package/ must be the folder that holds the package`)
    this.claim(rel, kind, entry.path)
    if (type === 'File' || type === 'OldFile') return this.file(rel, entry)
    if (type === 'SymbolicLink') this.symlink(rel, entry)
    else if (type === 'Link') this.hardLink(rel, entry)
    else this.sink?.dir(rel)
    entry.resume()
  }

  /** Each path once: a second entry of a path, or a path that is a folder to one entry and not to another, is refused. */
  private claim (rel: string, kind: Kind, name: string): void {
    for (const parent of parentsOf(rel)) {
      const seen = this.kinds.get(parent)
      if (seen !== undefined && seen !== 'dir') {
        throw new PackageError(`package entry ${quoted(name)} lies inside ${quoted(`package/${parent}`)}, which is a ${seen}: each path may appear once, as one kind`)
      }
      this.kinds.set(parent, 'dir')
    }
    const seen = this.kinds.get(rel)
    if (seen !== undefined && (kind !== 'dir' || seen !== 'dir' || this.explicitDirs.has(rel))) {
      const as = seen === kind ? 'twice' : `once as a ${seen === 'dir' ? 'folder' : seen} and once as a ${kind === 'dir' ? 'folder' : kind}`
      throw new PackageError(`package entry ${quoted(name)} appears ${as}: each path may appear once`)
    }
    this.kinds.set(rel, kind)
    if (kind === 'dir') this.explicitDirs.add(rel)
  }

  private symlink (rel: string, entry: ReadEntry): void {
    const target = entry.linkpath ?? ''
    const shown = `symbolic link ${quoted(entry.path)} to ${quoted(target)}`
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f\u007f\\]/.test(target)) throw new PackageError(`${shown} holds a control character or a backslash: a link target must be a plain relative path`)
    if (target.startsWith('/') || /^[a-zA-Z]:/.test(target)) throw new PackageError(`${shown} is absolute: links must point inside the package with a relative path`)
    this.symlinks.set(rel, target)
    // Through the links seen so far; finish() follows each again once all are known.
    if (linkDestination(rel, this.symlinks) === 'outside') throw new PackageError(`${shown} leads outside the package: links must point inside package/`)
  }

  private hardLink (rel: string, entry: ReadEntry): void {
    const target = packagePath(entry.linkpath ?? '', `hard link ${quoted(entry.path)} to`)
    if (!this.files.has(target) && !this.hardLinks.some((link) => link.rel === target)) {
      throw new PackageError(`hard link ${quoted(entry.path)} to ${quoted(entry.linkpath ?? '')} names no file before it: a hard link must name a file of the package that comes earlier in the archive`)
    }
    this.hardLinks.push({ rel, target })
  }

  private file (rel: string, entry: ReadEntry): void {
    this.unpackedSize += entry.size
    // The header says how much follows: too much is refused before any of it is inflated.
    if (this.unpackedSize > this.limits.maxUnpackedBytes) throw this.tooLarge()
    const mode = ((entry.mode ?? 0) & 0o111) !== 0 ? 0o755 : 0o644
    this.files.set(rel, mode)
    if (rel === 'package.json') {
      if (entry.size > MAX_MANIFEST_BYTES) throw new PackageError(`package/package.json is ${bytes(entry.size)}: at most ${bytes(MAX_MANIFEST_BYTES)} is allowed`)
      // Before the sink pipes the entry: a listener added later would miss what came first.
      const chunks: Buffer[] = []
      entry.on('data', (chunk: Buffer) => chunks.push(chunk))
      entry.on('end', () => { this.manifestText = Buffer.concat(chunks).toString('utf8') })
    }
    if (this.sink !== undefined) this.sink.file(rel, entry, mode)
    else entry.resume()
  }

  tooLarge (): PackageError {
    const most = bytes(this.limits.maxUnpackedBytes)
    return new PackageError(`the package unpacks to more than ${most}: at most ${most} unpacked is allowed`)
  }

  countInflated (n: number): void {
    this.inflated += n
    if (this.inflated > this.limits.maxUnpackedBytes) throw this.tooLarge()
  }

  /** The checks that need the whole archive: links through later links, and the manifest. */
  finish (expected: ExpectedPackage | undefined): Manifest {
    for (const [rel, target] of this.symlinks) {
      const where = linkDestination(rel, this.symlinks)
      if (where === 'inside') continue
      const shown = `symbolic link ${quoted(`package/${rel}`)} to ${quoted(target)}`
      throw new PackageError(where === 'loop'
        ? `${shown} goes round a loop of links: a link must lead to a path`
        : `${shown} leads outside the package through another link: links must point inside package/`)
    }
    const kind = this.kinds.get('package.json')
    if (kind === undefined) throw new PackageError(`the package has no package/package.json: an app package needs one (${UPLOAD})`)
    if (!this.files.has('package.json') || this.manifestText === undefined) {
      throw new PackageError('package/package.json is not a file: it must be a plain file, not a link or a folder')
    }
    return manifestOf(this.manifestText, expected)
  }
}

function unsupported (entry: ReadEntry): PackageError {
  if (entry.meta) return new PackageError(`the package holds an extended tar header of ${bytes(entry.size)}: at most ${bytes(MAX_META_BYTES)} is allowed`)
  return new PackageError(`package entry ${quoted(entry.path)} is an entry of type ${entry.type}: only files, folders and links are allowed`)
}

function manifestOf (text: string, expected: ExpectedPackage | undefined): Manifest {
  let manifest: unknown
  try {
    manifest = JSON.parse(text.replace(/^\uFEFF/, ''))
  } catch (err) {
    throw new PackageError(`package/package.json is not valid JSON (${(err as Error).message}): it must hold a JSON object`)
  }
  if (typeof manifest !== 'object' || manifest === null || Array.isArray(manifest)) {
    throw new PackageError('package/package.json does not hold a JSON object: it must, with a "name" and a "version"')
  }
  const { name, version } = manifest as Record<string, unknown>
  if (typeof name !== 'string' || name === '') throw new PackageError('package/package.json has no "name": it needs one (for example "my-app" or "@acme/widgets")')
  if (!isPackageName(name)) throw new PackageError(`package/package.json name ${quoted(name)} is not a valid package name: lower case letters, digits, - . _ ~, optionally @scope/`)
  if (typeof version !== 'string' || version === '') throw new PackageError(`package/package.json of ${name} has no "version": it needs one (for example "1.0.0")`)
  if (!isPackageVersion(version)) throw new PackageError(`package/package.json version ${quoted(version)} is not valid: letters, digits, . + _ - only`)
  if (expected?.name !== undefined && expected.name !== name) {
    throw new PackageError(`the package is ${name}@${version}, but it was uploaded as ${expected.name}: the name in package.json must match`)
  }
  if (expected?.version !== undefined && expected.version !== version) {
    throw new PackageError(`the package is ${name}@${version}, but it was uploaded as version ${expected.version}: the version in package.json must match`)
  }
  return { name, version, manifest: manifest as Record<string, unknown> }
}

/** tar's complaint about the archive, in words an uploader can act on. */
function tarProblem (err: Error): PackageError {
  if (/truncated/i.test(err.message)) return new PackageError(`the package's tar archive is cut short: ${UPLOAD}, whole`)
  return new PackageError(`the package is not a valid tar archive: ${UPLOAD}`)
}

function checkNotCompressedTwice (head: Buffer): void {
  if (head[0] === 0x1f && head[1] === 0x8b) throw new PackageError(`the package is gzip-compressed twice: ${UPLOAD}`)
}

/**
 * Streams the upload through gunzip and tar's parser, checking each entry as it comes; the first
 * problem stops both (gunzip inflates no further). Resolves once the parser has read every entry.
 */
async function readPackage (input: Buffer, limits: PackageLimits, sink: Sink | undefined): Promise<PackageReader> {
  if (input.length > limits.maxBytes) throw new PackageError(`the package is ${bytes(input.length)}: at most ${bytes(limits.maxBytes)} is allowed`, 413)
  if (input.length < 2 || input[0] !== 0x1f || input[1] !== 0x8b) throw new PackageError(`the package is not gzip-compressed: ${UPLOAD}`)
  const reader = new PackageReader(limits, sink)
  const source = Readable.from((function * () {
    for (let at = 0; at < input.length; at += SLICE_BYTES) yield input.subarray(at, at + SLICE_BYTES)
  })())
  const gunzip = createGunzip()
  // Fed the plain tar gunzip gives: tar's own sniffing must find nothing to inflate unseen.
  const parser = new Parser({ strict: true, zstd: false, brotli: false, maxMetaEntrySize: MAX_META_BYTES })
  let head: Buffer | undefined = Buffer.alloc(0)

  await new Promise<void>((resolve, reject) => {
    let failed = false
    const fail = (err: unknown): void => {
      if (failed) return
      failed = true
      source.destroy()
      gunzip.destroy()
      reject(err)
    }
    const guard = (work: () => void): void => {
      if (failed) return
      try { work() } catch (err) { fail(err) }
    }
    const feed = (chunk: Buffer): void => {
      if (parser.write(chunk)) return
      gunzip.pause()
      parser.once('drain', () => gunzip.resume())
    }
    if (sink !== undefined) sink.stop = fail
    source.on('error', fail)
    gunzip.on('error', () => fail(new PackageError(`the package's gzip data is damaged or cut short: ${UPLOAD}, whole`)))
    gunzip.on('data', (chunk: Buffer) => guard(() => {
      reader.countInflated(chunk.length)
      if (head === undefined) return feed(chunk)
      head = Buffer.concat([head, chunk])
      if (head.length < 512) return
      checkNotCompressedTwice(head)
      const first = head
      head = undefined
      feed(first)
    }))
    gunzip.on('end', () => guard(() => {
      if (head !== undefined) {
        checkNotCompressedTwice(head)
        parser.write(head)
      }
      parser.end()
    }))
    parser.on('entry', (entry: ReadEntry) => guard(() => reader.entry(entry)))
    // tar cuts a name at a NUL: one in a long name or a pax record is refused before it can.
    parser.on('meta', (text: string) => guard(() => {
      if (text.replace(/\0+$/, '').includes('\0')) throw new PackageError('the package holds a name with a NUL character (in an extended tar header): names must be printable')
    }))
    parser.on('ignoredEntry', (entry: ReadEntry) => guard(() => { throw unsupported(entry) }))
    parser.on('error', (err: Error) => fail(err instanceof PackageError ? err : tarProblem(err)))
    parser.on('end', () => guard(resolve))
    source.pipe(gunzip)
  })
  return reader
}

function inspected (input: Buffer, reader: PackageReader, manifest: Manifest): InspectedPackage {
  return {
    ...manifest,
    sha256: createHash('sha256').update(input).digest('hex'),
    size: input.length,
    unpackedSize: reader.unpackedSize,
    entries: reader.entries
  }
}

/**
 * Reads and checks an uploaded package without writing anything: its manifest, digest and sizes.
 * `expected` (the name and version the uploader gave, from a file name or the URL) must agree
 * with its package.json.
 */
export async function inspectPackage (input: Buffer, limits: PackageLimits = DEFAULT_PACKAGE_LIMITS, expected?: ExpectedPackage): Promise<InspectedPackage> {
  const reader = await readPackage(input, limits, undefined)
  return inspected(input, reader, reader.finish(expected))
}

/**
 * Checks an uploaded package as inspectPackage does and writes its files under `dest` (made here:
 * it must not exist yet), `package/` left off. On any failure, `dest` is removed with all that
 * was written into it.
 */
export async function unpackPackage (input: Buffer, dest: string, limits: PackageLimits = DEFAULT_PACKAGE_LIMITS): Promise<InspectedPackage> {
  const folder = path.resolve(dest)
  await fs.mkdir(path.dirname(folder), { recursive: true })
  try {
    await fs.mkdir(folder)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new Error(`cannot unpack a package into ${folder}: it exists already; unpack into a new folder`, { cause: err })
    throw err
  }
  const writer = new DiskWriter(folder)
  try {
    const reader = await readPackage(input, limits, writer)
    await writer.settle()
    const manifest = reader.finish(undefined)
    await writer.links(reader)
    await writer.folderModes(reader)
    return inspected(input, reader, manifest)
  } catch (err) {
    await writer.abort()
    await fs.rm(folder, { recursive: true, force: true })
    throw err
  }
}
