import { sql, type Kysely } from 'kysely'

// Frozen in time: never import application code here.

/**
 * `GET /api/v1/audit` pages newest first by id, optionally of one action or one actor (without
 * regard to case, like usernames). Without these indexes a filter naming a rare action or actor
 * would read the whole table, page after page, back to the retention limit.
 */
export async function up (db: Kysely<any>): Promise<void> {
  await db.schema.createIndex('audit_action_id_idx').on('audit').columns(['action', 'id']).execute()
  await db.schema.createIndex('audit_actor_id_idx').on('audit').expression(sql`lower(actor), id`).execute()
}

export async function down (db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('audit_actor_id_idx').execute()
  await db.schema.dropIndex('audit_action_id_idx').execute()
}
