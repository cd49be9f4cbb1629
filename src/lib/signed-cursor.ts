import { createHmac, timingSafeEqual } from 'node:crypto'

const TAG_BYTES = 12

/**
 * Opaque paging cursors (`nextBefore`): a fixed-size body and an HMAC tag over it, base64url. The
 * key is derived under a label of its own from the secret every node shares through the database
 * (`session_token_key`), so a cursor pages on every node and across restarts, and a tag of one kind
 * never passes as another's (a session token's, another list's cursor). A cursor that was edited,
 * made up, or issued for another scope is refused instead of silently paging from somewhere else.
 */
export class SignedCursors {
  /** Base64url length of every cursor: what tells one apart from other input before decoding. */
  readonly length: number
  private readonly key: Buffer

  constructor (sharedKey: Buffer, label: string, private readonly bodyBytes: number) {
    this.key = createHmac('sha256', sharedKey).update(label).digest()
    this.length = Math.ceil((bodyBytes + TAG_BYTES) * 4 / 3)
  }

  /** A cursor for `body`; with `scope` (a reaktor id), valid for that scope only. */
  encode (body: Buffer, scope?: string): string {
    if (body.length !== this.bodyBytes) throw new Error(`a cursor body is ${this.bodyBytes} bytes, not ${body.length}`)
    return Buffer.concat([body, this.tag(body, scope)]).toString('base64url')
  }

  /** The body a cursor of this scope holds; undefined for anything this service did not issue for it. */
  decode (cursor: string, scope?: string): Buffer | undefined {
    if (cursor.length !== this.length || !/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined
    const bytes = Buffer.from(cursor, 'base64url')
    // The last character carries unused bits: only the spelling this service issues is one of its cursors.
    if (bytes.length !== this.bodyBytes + TAG_BYTES || bytes.toString('base64url') !== cursor) return undefined
    const body = bytes.subarray(0, this.bodyBytes)
    if (!timingSafeEqual(bytes.subarray(this.bodyBytes), this.tag(body, scope))) return undefined
    return body
  }

  private tag (body: Buffer, scope: string | undefined): Buffer {
    const hmac = createHmac('sha256', this.key)
    if (scope !== undefined) {
      // Length-prefixed: no scope/body split of one byte string can match another's.
      const id = Buffer.from(scope, 'utf8')
      const length = Buffer.alloc(4)
      length.writeUInt32BE(id.length)
      hmac.update(length).update(id)
    }
    return hmac.update(body).digest().subarray(0, TAG_BYTES)
  }
}
