import { sql, type Kysely } from 'kysely'

// Frozen in time: never import application code here.

/**
 * `sessions.tagged`: written true by the versions that tag their tokens. During a rolling upgrade
 * nodes of the earlier version keep running on the migrated database and keep issuing untagged
 * tokens (their inserts leave `tagged` false); the trigger moves `session_token_key.untagged_until`
 * to the end of each such session, so that the nodes that tag keep looking untagged tokens up
 * until the last of them has expired, not only those that were live at the migration.
 */
export async function up (db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('sessions')
    .addColumn('tagged', 'boolean', (c) => c.notNull().defaultTo(false))
    .execute()
  await sql`
    create function reaktor_untagged_session() returns trigger language plpgsql as $$
    begin
      update session_token_key set untagged_until = greatest(untagged_until, new.expires_at);
      return new;
    end
    $$
  `.execute(db)
  await sql`
    create trigger sessions_untagged before insert on sessions
    for each row when (not new.tagged) execute function reaktor_untagged_session()
  `.execute(db)
}

export async function down (db: Kysely<any>): Promise<void> {
  await sql`drop trigger if exists sessions_untagged on sessions`.execute(db)
  await sql`drop function if exists reaktor_untagged_session()`.execute(db)
  await db.schema.alterTable('sessions').dropColumn('tagged').execute()
}
