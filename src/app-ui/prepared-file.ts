import { createHash } from 'node:crypto'
import { promisify } from 'node:util'
import zlib from 'node:zlib'
import { injectHelper } from './helper-script.js'
import { contentTypeOf, isCompressible, isHtml } from './mime.js'

const gzip = promisify(zlib.gzip)
const brotli = promisify(zlib.brotliCompress)

/** Below this, compression saves less than the Content-Encoding header costs. */
const MIN_COMPRESS_BYTES = 256

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

function strongEtag (body: Buffer): string {
  return createHash('sha256').update(body).digest('base64url').slice(0, 27)
}

/** Builds a CachedFile from a file's bytes: helper injection, ETags and compression, each done once. */
export async function prepareFile (file: string, raw: Buffer): Promise<CachedFile> {
  const contentType = contentTypeOf(file)
  const body = isHtml(file) ? injectHelper(raw) : raw
  const tag = strongEtag(body)
  const entry: CachedFile = { contentType, identity: { body, etag: `"${tag}"` }, bytes: body.length }
  if (isCompressible(contentType) && body.length >= MIN_COMPRESS_BYTES) {
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
