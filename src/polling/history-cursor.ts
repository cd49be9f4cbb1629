import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import { loadCursorKey } from '../db/cursor-key.js'
import { SignedCursors } from '../lib/signed-cursor.js'

/**
 * A place in a reaktor's run history, in the order of its index: runs that started earlier, or at
 * the same microsecond with a smaller `seq`, come after it. A timestamp bound is `seq` 0: identity
 * values start at 1, so it keeps exactly the runs that started strictly before `startedUs`.
 */
export interface HistoryPosition {
  /** started_at in microseconds since the epoch (PostgreSQL's precision, exact as a bigint). */
  startedUs: bigint
  seq: bigint
}

const POSITION_BYTES = 16

/**
 * The `nextBefore` cursors of the run history: the position of the last run of a page, tagged for
 * its reaktor, so that a cursor issued for another reaktor is refused too.
 */
export class HistoryCursors {
  private readonly cursors: SignedCursors

  constructor (sharedKey: Buffer) {
    this.cursors = new SignedCursors(sharedKey, 'reaktor run history cursor', POSITION_BYTES)
  }

  /** Base64url length of a cursor: what tells one apart from a timestamp before decoding. */
  get length (): number {
    return this.cursors.length
  }

  encode (reaktorId: string, position: HistoryPosition): string {
    const body = Buffer.alloc(POSITION_BYTES)
    body.writeBigInt64BE(position.startedUs, 0)
    body.writeBigInt64BE(position.seq, 8)
    return this.cursors.encode(body, reaktorId)
  }

  /** The position a cursor of this reaktor names; undefined for anything this service did not issue for it. */
  decode (reaktorId: string, cursor: string): HistoryPosition | undefined {
    const body = this.cursors.decode(cursor, reaktorId)
    return body === undefined ? undefined : { startedUs: body.readBigInt64BE(0), seq: body.readBigInt64BE(8) }
  }
}

/** The cursors of this cluster, keyed by the secret the migration stored. */
export async function loadHistoryCursors (db: Kysely<Database>): Promise<HistoryCursors> {
  return new HistoryCursors(await loadCursorKey(db))
}

const ISO_8601 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/

/** What a `before` timestamp must look like, for messages. */
export const TIMESTAMP_FORM = 'an ISO 8601 date-time with a time zone, such as 2026-11-25T08:00:00Z or 2026-11-25T09:00:00.5+01:00'

/**
 * An ISO 8601 date-time (RFC 3339 form: seconds and a zone required) as the position "started
 * strictly before it". Returns a reason instead when the text has that form but names no real
 * time (February 30th, hour 24), and undefined when it does not have the form at all. Digits past
 * the microsecond round up: a run at 08:00:00.000000 did start strictly before 08:00:00.0000001.
 */
export function parseTimestamp (text: string): HistoryPosition | { invalid: string } | undefined {
  const m = ISO_8601.exec(text)
  if (m === null) return undefined
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number)
  const invalid = (why: string): { invalid: string } => ({ invalid: `${text} is no real time: ${why}` })
  if (month < 1 || month > 12) return invalid(`month ${m[2]} does not exist`)
  const at = new Date(0)
  at.setUTCFullYear(year, month - 1, day) // not Date.UTC: it reads years 0-99 as 1900-1999
  // Date rolls a day outside the month (0, February 30th) over into a neighbour: it reads back different.
  if (at.getUTCDate() !== day) return invalid(`day ${m[3]} does not exist in ${m[1]}-${m[2]}`)
  if (hour > 23 || minute > 59 || second > 59) return invalid(`${m[4]}:${m[5]}:${m[6]} is not a time of day`)
  const offsetHours = m[8] === undefined ? 0 : Number(m[9])
  const offsetMinutes = m[8] === undefined ? 0 : Number(m[10])
  if (offsetHours > 23 || offsetMinutes > 59) return invalid(`${m[8]}${m[9]}:${m[10]} is not a time zone offset`)

  at.setUTCHours(hour, minute, second, 0)
  const fraction = (m[7] ?? '').padEnd(9, '0')
  const micros = BigInt(fraction.slice(0, 6)) + (/[1-9]/.test(fraction.slice(6)) ? 1n : 0n)
  const offsetUs = BigInt((offsetHours * 60 + offsetMinutes) * 60_000_000) * (m[8] === '-' ? -1n : 1n)
  return { startedUs: BigInt(at.getTime()) * 1000n + micros - offsetUs, seq: 0n }
}
