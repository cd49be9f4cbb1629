import { createHash } from 'node:crypto'
import { promisify } from 'node:util'
import zlib from 'node:zlib'
import { HELPER_TAG_BYTES, injectHelper } from './helper-script.js'
import { contentTypeOf, isCompressible, isHtml } from './mime.js'

const gzip = promisify(zlib.gzip)
const brotli = promisify(zlib.brotliCompress)

/** Below this, compression saves less than the Content-Encoding header costs. */
const MIN_COMPRESS_BYTES = 256

/**
 * Above this, files are compressed at gzip 6 and brotli 6 instead of 9 and 11: on a 1.6 MB page
 * gzip 9 took 114 ms against 21 ms for 5 % more bytes, brotli 11 2.4 s and 9 72 ms against 27 ms
 * for under 1 % more, and the first request for the file waits for both.
 */
const LARGE_BYTES = 256 * 1024

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

/** The variant sent for an encoding (identity when there is none, or no such variant). */
export function variantOf (file: CachedFile, encoding: Encoding | undefined): Variant {
  return encoding === undefined ? file.identity : file[encoding] ?? file.identity
}

function compresses (contentType: string, bytes: number): boolean {
  return isCompressible(contentType) && bytes >= MIN_COMPRESS_BYTES
}

/**
 * The most memory prepareFile can take for a file of `size` bytes: the body (helper included) and
 * up to two variants, each kept only when smaller than it. Known before the file is read, so a
 * file that could not stay in the cache is never prepared (and compressed) for one request.
 */
export function preparedBytesBound (file: string, size: number): number {
  const body = size + (isHtml(file) ? HELPER_TAG_BYTES : 0)
  return compresses(contentTypeOf(file), body) ? 3 * body : body
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
  if (compresses(contentType, body.length)) {
    const large = body.length > LARGE_BYTES
    const [gz, br] = await Promise.all([
      gzip(body, { level: large ? 6 : zlib.constants.Z_BEST_COMPRESSION }),
      brotli(body, {
        params: {
          [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT,
          [zlib.constants.BROTLI_PARAM_QUALITY]: large ? 6 : zlib.constants.BROTLI_MAX_QUALITY,
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
