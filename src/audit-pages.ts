import { createHmac, timingSafeEqual } from 'node:crypto'
import { sql, type Kysely } from 'kysely'
import type { Database } from './db/schema.js'
import type { AuditEntryType } from './schemas/audit.js'

const ID_BYTES = 8
const TAG_BYTES = 12
const CURSOR_LENGTH = Math.ceil((ID_BYTES + TAG_BYTES) * 4 / 3)

/**
 * The `nextBefore` cursors of the audit log: the id of a page's last entry and an HMAC tag over it,
 * base64url. Keyed by the secret every node shares through the database (`session_token_key`),
 * derived under a label of its own, so a cursor pages on every node and across restarts, and one
 * that was edited or made up is refused (400) instead of silently paging from somewhere else.
 */
export class AuditCursors {
  private readonly key: Buffer

  constructor (sharedKey: Buffer) {
    this.key = createHmac('sha256', sharedKey).update('reaktor audit cursor').digest()
  }

  encode (id: bigint): string {
    const body = Buffer.alloc(ID_BYTES)
    body.writeBigInt64BE(id)
    return Buffer.concat([body, this.tag(body)]).toString('base64url')
  }

  /** The id a cursor names; undefined for anything this service did not issue. */
  decode (cursor: string): bigint | undefined {
    if (cursor.length !== CURSOR_LENGTH || !/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined
    const bytes = Buffer.from(cursor, 'base64url')
    // The last character carries 2 unused bits: only the encoding this service issues is one of its cursors.
    if (bytes.length !== ID_BYTES + TAG_BYTES || bytes.toString('base64url') !== cursor) return undefined
    const body = bytes.subarray(0, ID_BYTES)
    if (!timingSafeEqual(bytes.subarray(ID_BYTES), this.tag(body))) return undefined
    return body.readBigInt64BE()
  }

  private tag (body: Buffer): Buffer {
    return createHmac('sha256', this.key).update(body).digest().subarray(0, TAG_BYTES)
  }
}

export interface AuditPageQuery {
  limit: number
  before?: string
  action?: string
  actor?: string
}

export interface AuditPage {
  entries: AuditEntryType[]
  nextBefore: string | null
}

interface Row {
  id: string
  at: Date
  action: string
  actor: string | null
  address: string | null
  node: string
  targets: string[]
  details: Record<string, unknown>
}

/** What `before` must be, for messages. */
export const BEFORE_RULE = 'before must be the nextBefore of a previous page'

/**
 * Pages of the audit log, newest first by id (the order rows were written in). Keyset paging: the
 * next page starts below the last id shown, whatever was written or pruned meanwhile, so no entry
 * is shown twice or skipped. One statement; one more row than asked tells whether an older page exists.
 */
export class AuditLog {
  constructor (private readonly db: Kysely<Database>, private readonly cursors: AuditCursors) {}

  async page ({ limit, before, action, actor }: AuditPageQuery): Promise<AuditPage | { invalid: string }> {
    const below = before === undefined ? undefined : this.cursors.decode(before)
    if (before !== undefined && below === undefined) return { invalid: `${BEFORE_RULE} (an opaque cursor); this one was not issued by this service` }
    const { rows } = await sql<Row>`
      select id, at, action, actor, address, node, targets, details from audit
      where true
        ${below === undefined ? sql`` : sql`and id < ${below.toString()}::bigint`}
        ${action === undefined ? sql`` : sql`and action = ${action}`}
        ${actor === undefined ? sql`` : sql`and lower(actor) = lower(${actor})`}
      order by id desc
      limit ${limit + 1}
    `.execute(this.db)
    const page = rows.slice(0, limit)
    return {
      entries: page.map((r) => ({ ...r, id: Number(r.id), at: r.at.toISOString() })),
      nextBefore: rows.length > limit ? this.cursors.encode(BigInt(page[page.length - 1].id)) : null
    }
  }
}

/** The audit log of this cluster, its cursors keyed by the secret the migrations stored. */
export async function loadAuditLog (db: Kysely<Database>): Promise<AuditLog> {
  const row = await db.selectFrom('session_token_key').select('key').executeTakeFirstOrThrow()
  return new AuditLog(db, new AuditCursors(row.key))
}
