import { createHash } from 'node:crypto'
import fs from 'node:fs/promises'
import path from 'node:path'
import { promisify } from 'node:util'
import zlib from 'node:zlib'
import { injectHelper } from './helper-script.js'

const gzip = promisify(zlib.gzip)
const brotli = promisify(zlib.brotliCompress)

/** Content types by extension; anything else is application/octet-stream (never sniffed: nosniff). */
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.htm': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.cjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.webmanifest': 'application/manifest+json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.md': 'text/markdown; charset=utf-8',
  '.csv': 'text/csv; charset=utf-8',
  '.xml': 'application/xml; charset=utf-8',
  '.svg': 'image/svg+xml; charset=utf-8',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.avif': 'image/avif',
  '.ico': 'image/x-icon',
  '.bmp': 'image/bmp',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.ttf': 'font/ttf',
  '.otf': 'font/otf',
  '.eot': 'application/vnd.ms-fontobject',
  '.wasm': 'application/wasm',
  '.pdf': 'application/pdf',
  '.mp3': 'audio/mpeg',
  '.wav': 'audio/wav',
  '.ogg': 'audio/ogg',
  '.mp4': 'video/mp4',
  '.webm': 'video/webm',
  '.zip': 'application/zip'
}

/** Types worth compressing (already-compressed formats such as PNG or WOFF2 are not). */
const COMPRESSIBLE = /^(text\/|application\/(json|manifest\+json|xml|wasm)|image\/(svg\+xml|x-icon|bmp)|font\/(ttf|otf)|application\/vnd\.ms-fontobject)/

/** Below this, compression saves less than the Content-Encoding header costs. */
const MIN_COMPRESS_BYTES = 256

export function contentTypeOf (file: string): string {
  return TYPES[path.extname(file).toLowerCase()] ?? 'application/octet-stream'
}

export function isHtml (file: string): boolean {
  const ext = path.extname(file).toLowerCase()
  return ext === '.html' || ext === '.htm'
}

export type Encoding = 'br' | 'gzip'

export interface Variant {
  body: Buffer
  etag: string
}

/** One file, ready to send: the bytes (helper injected for HTML) and precompressed variants. */
export interface CachedFile {
  contentType: string
  identity: Variant
  br?: Variant
  gzip?: Variant
  /** Memory held by all variants. */
  bytes: number
}

function strongEtag (body: Buffer): string {
  return createHash('sha256').update(body).digest('base64url').slice(0, 27)
}

/** Builds a CachedFile from a file's bytes: helper injection, ETags and compression, each done once. */
export async function prepareFile (file: string, raw: Buffer): Promise<CachedFile> {
  const contentType = contentTypeOf(file)
  const body = isHtml(file) ? injectHelper(raw) : raw
  const tag = strongEtag(body)
  const entry: CachedFile = { contentType, identity: { body, etag: `"${tag}"` }, bytes: body.length }
  if (COMPRESSIBLE.test(contentType) && body.length >= MIN_COMPRESS_BYTES) {
    const [gz, br] = await Promise.all([
      gzip(body, { level: zlib.constants.Z_BEST_COMPRESSION }),
      brotli(body, {
        params: {
          [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT,
          // Best ratio for what a browser fetches often; large files get a faster level so the
          // first request for them does not wait long (it is computed once either way).
          [zlib.constants.BROTLI_PARAM_QUALITY]: body.length <= 256 * 1024 ? zlib.constants.BROTLI_MAX_QUALITY : 9,
          [zlib.constants.BROTLI_PARAM_SIZE_HINT]: body.length
        }
      })
    ])
    // Only variants that actually save bytes are kept.
    if (gz.length < body.length) {
      entry.gzip = { body: gz, etag: `"${tag}-gz"` }
      entry.bytes += gz.length
    }
    if (br.length < body.length) {
      entry.br = { body: br, etag: `"${tag}-br"` }
      entry.bytes += br.length
    }
  }
  return entry
}

/**
 * The encoding to answer with, from Accept-Encoding and the variants at hand: the highest q-value
 * wins, brotli on a tie (it is the smaller). undefined: identity.
 */
export function chooseEncoding (acceptEncoding: string | undefined, available: { br?: unknown, gzip?: unknown }): Encoding | undefined {
  if (acceptEncoding === undefined || acceptEncoding === '') return undefined
  const q = new Map<string, number>()
  for (const part of acceptEncoding.split(',')) {
    const [token, ...params] = part.trim().toLowerCase().split(';')
    if (token === '') continue
    let weight = 1
    for (const param of params) {
      const [key, value] = param.trim().split('=')
      if (key === 'q') weight = Number(value)
    }
    q.set(token === 'x-gzip' ? 'gzip' : token, Number.isFinite(weight) ? weight : 0)
  }
  const star = q.get('*') ?? 0
  const weightOf = (encoding: Encoding): number => q.get(encoding) ?? star
  let best: Encoding | undefined
  let bestWeight = 0
  for (const encoding of ['br', 'gzip'] as const) {
    if (available[encoding] === undefined) continue
    const weight = weightOf(encoding)
    if (weight > bestWeight) {
      best = encoding
      bestWeight = weight
    }
  }
  return best
}

/** If-None-Match uses the weak comparison (RFC 9110 13.1.2). */
export function etagMatches (ifNoneMatch: string | undefined, etag: string): boolean {
  if (ifNoneMatch === undefined) return false
  const bare = etag.replace(/^W\//, '')
  return ifNoneMatch.split(',').some((candidate) => {
    const c = candidate.trim()
    return c === '*' || c.replace(/^W\//, '') === bare
  })
}

/**
 * An LRU of prepared files, bounded by the memory of all their variants. Keyed by real path: the
 * content of a version path never changes while the service runs, so an entry never goes stale.
 * Concurrent first requests for one file share one read.
 */
export class FileCache {
  private readonly entries = new Map<string, CachedFile>()
  private readonly loading = new Map<string, Promise<CachedFile>>()
  private total = 0

  constructor (readonly maxBytes: number, readonly maxFileBytes: number) {}

  /** Whether a file of this size is served from memory (else it is streamed from disk). */
  accepts (size: number): boolean {
    return size <= this.maxFileBytes && size <= this.maxBytes
  }

  get bytes (): number {
    return this.total
  }

  get size (): number {
    return this.entries.size
  }

  /** The entry if it is in memory now, without loading it or changing its LRU position. */
  peek (key: string): CachedFile | undefined {
    return this.entries.get(key)
  }

  async get (key: string, load: () => Promise<CachedFile>): Promise<CachedFile> {
    const hit = this.entries.get(key)
    if (hit !== undefined) {
      // Map order is insertion order: re-inserting marks it most recently used.
      this.entries.delete(key)
      this.entries.set(key, hit)
      return hit
    }
    const pending = this.loading.get(key)
    if (pending !== undefined) return await pending
    const promise = load()
    this.loading.set(key, promise)
    try {
      const entry = await promise
      this.insert(key, entry)
      return entry
    } finally {
      this.loading.delete(key)
    }
  }

  private insert (key: string, entry: CachedFile): void {
    if (entry.bytes > this.maxBytes) return
    this.entries.set(key, entry)
    this.total += entry.bytes
    for (const [oldest, old] of this.entries) {
      if (this.total <= this.maxBytes) break
      this.entries.delete(oldest)
      this.total -= old.bytes
    }
  }
}

export type Resolution =
  | { kind: 'file', realPath: string, size: number, mtimeMs: number }
  /** A folder requested without its trailing slash: redirect. */
  | { kind: 'folder' }
  | { kind: 'missing' }
  /** A link leading out of public/, or to a dot file inside it. */
  | { kind: 'forbidden' }

/** Bounds the memo of resolved paths (a link cycle inside public/ could make it unbounded). */
const MAX_MEMO = 10_000

/**
 * Maps checked path segments onto one app's `public/` folder. Segments arrive decoded and
 * validated (none empty, none starting with a dot); this adds what only the file system knows:
 * the real path, after every symbolic link, must still be inside `public/` and must not be a dot
 * file. Positive answers are memoised (files never change while the service runs).
 */
export class PublicFolder {
  private readonly memo = new Map<string, Resolution>()

  /** @param root the real path of `public/` */
  constructor (readonly root: string) {}

  async resolve (segments: readonly string[], trailingSlash: boolean): Promise<Resolution> {
    const key = segments.join('/') + (trailingSlash ? '/' : '')
    const memoised = this.memo.get(key)
    if (memoised !== undefined) return memoised
    const resolution = await this.lookup(segments, trailingSlash)
    if (resolution.kind === 'file' || resolution.kind === 'folder') {
      if (this.memo.size >= MAX_MEMO) this.memo.clear()
      this.memo.set(key, resolution)
    }
    return resolution
  }

  private async lookup (segments: readonly string[], trailingSlash: boolean): Promise<Resolution> {
    const target = await this.real(path.join(this.root, ...segments))
    if (target.kind !== 'ok') return target
    if (target.stat.isDirectory()) {
      if (!trailingSlash) return { kind: 'folder' }
      const index = await this.real(path.join(target.realPath, 'index.html'))
      if (index.kind !== 'ok') return index
      if (!index.stat.isFile()) return { kind: 'missing' }
      return { kind: 'file', realPath: index.realPath, size: index.stat.size, mtimeMs: index.stat.mtimeMs }
    }
    if (!target.stat.isFile() || trailingSlash) return { kind: 'missing' }
    return { kind: 'file', realPath: target.realPath, size: target.stat.size, mtimeMs: target.stat.mtimeMs }
  }

  private async real (candidate: string): Promise<{ kind: 'ok', realPath: string, stat: import('node:fs').Stats } | { kind: 'missing' } | { kind: 'forbidden' }> {
    let realPath: string
    try {
      realPath = await fs.realpath(candidate)
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ENAMETOOLONG') return { kind: 'missing' }
      if (code === 'ELOOP' || code === 'EACCES') return { kind: 'forbidden' }
      throw err
    }
    if (realPath !== this.root && !realPath.startsWith(this.root + path.sep)) return { kind: 'forbidden' }
    const inside = path.relative(this.root, realPath)
    if (inside !== '' && inside.split(path.sep).some((part) => part.startsWith('.'))) return { kind: 'forbidden' }
    try {
      return { kind: 'ok', realPath, stat: await fs.stat(realPath) }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' }
      throw err
    }
  }
}
