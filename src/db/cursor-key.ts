import type { Kysely } from 'kysely'
import type { Database } from './schema.js'

/** The secret the migrations stored, which every node's paging cursors are keyed by (src/lib/signed-cursor.ts). */
export async function loadCursorKey (db: Kysely<Database>): Promise<Buffer> {
  const row = await db.selectFrom('session_token_key').select('key').executeTakeFirstOrThrow()
  return row.key
}
