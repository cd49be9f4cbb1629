import { sql, type Kysely } from 'kysely'
import { loadCursorKey } from '../db/cursor-key.js'
import type { Database } from '../db/schema.js'
import { SignedCursors } from '../lib/signed-cursor.js'

const ID_BYTES = 8

/** The `nextBefore` cursors of the audit log: the id of a page's last entry, tagged. */
class AuditCursors {
  private readonly cursors: SignedCursors

  constructor (sharedKey: Buffer) {
    this.cursors = new SignedCursors(sharedKey, 'reaktor audit cursor', ID_BYTES)
  }

  encode (id: bigint): string {
    const body = Buffer.alloc(ID_BYTES)
    body.writeBigInt64BE(id)
    return this.cursors.encode(body)
  }

  /** The id a cursor names; undefined for anything this service did not issue. */
  decode (cursor: string): bigint | undefined {
    return this.cursors.decode(cursor)?.readBigInt64BE()
  }
}

export interface AuditPageQuery {
  limit: number
  before?: string
  action?: string
  actor?: string
}

/**
 * One entry as the API shows it. The AuditEntry schema (src/schemas/audit.ts) describes it; the
 * route's typed reply checks that the two agree.
 */
export interface AuditEntry {
  id: number
  at: string
  action: string
  actor: string | null
  address: string | null
  node: string
  targets: string[]
  details: Record<string, unknown>
}

export interface AuditPage {
  entries: AuditEntry[]
  nextBefore: string | null
}

/** A row as pg returns it: the bigint id as a string, the time as a Date. */
type Row = Omit<AuditEntry, 'id' | 'at'> & { id: string, at: Date }

/** What `before` must be, for messages. */
export const BEFORE_RULE = 'before must be the nextBefore of a previous page'

/**
 * Pages of the audit log, newest first by id (the order rows were written in). Keyset paging: the
 * next page starts below the last id shown, whatever was written or pruned meanwhile, so no entry
 * is shown twice or skipped. One statement; one more row than asked tells whether an older page exists.
 */
class AuditLog {
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
  return new AuditLog(db, new AuditCursors(await loadCursorKey(db)))
}
