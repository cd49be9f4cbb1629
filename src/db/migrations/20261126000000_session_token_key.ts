import { randomBytes } from 'node:crypto'
import { sql, type Kysely } from 'kysely'

// Frozen in time: never import application code here.

/**
 * `session_token_key`: one row, the key every node tags its session tokens with, so that any node
 * can tell a token it never issued from one it did without asking the database (see
 * src/auth/token-tag.ts). Not a credential: a token still has to be a live session.
 *
 * `untagged_until`: sessions issued before tokens were tagged stay valid; until the last of them
 * has expired, a token without a valid tag is still looked up.
 */
export async function up (db: Kysely<any>): Promise<void> {
  await db.schema.createTable('session_token_key')
    .addColumn('id', 'smallint', (c) => c.primaryKey().defaultTo(1).check(sql`id = 1`))
    .addColumn('key', 'bytea', (c) => c.notNull())
    .addColumn('untagged_until', 'timestamptz')
    .execute()
  await sql`
    insert into session_token_key (key, untagged_until)
    select ${randomBytes(32)}, max(expires_at) from sessions where revoked_at is null and expires_at > now()
  `.execute(db)
}

export async function down (db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('session_token_key').execute()
}
