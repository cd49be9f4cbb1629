import { sql, type Kysely } from 'kysely'

// Frozen in time: never import application code here.

/**
 * Accounts: roles and disabling on `users`, API tokens for scripts, and the audit table.
 *
 * - `users.role`: existing users were all admins (the first-run admin, ADMIN_USERNAME); new ones
 *   default to operator. Usernames become unique without regard to case; a database holding two
 *   names that differ only in case cannot take this migration, and says which.
 * - `api_tokens`: like sessions, only the SHA-256 of the token is stored; revoking deletes the row.
 * - `audit`: one row per privileged action, newest read first by id; pruned by `at`.
 */
export async function up (db: Kysely<any>): Promise<void> {
  const clash = await sql<{ name: string }>`
    select lower(username) as name from users group by lower(username) having count(*) > 1 limit 1`.execute(db)
  if (clash.rows.length > 0) {
    throw new Error(`users: several usernames differ only in case (${JSON.stringify(clash.rows[0].name)}); rename all but one before upgrading`)
  }
  await db.schema.alterTable('users')
    .addColumn('role', 'text', (c) => c.notNull().defaultTo('admin').check(sql`role in ('admin', 'operator')`))
    .addColumn('disabled_at', 'timestamptz')
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute()
  await db.schema.alterTable('users').alterColumn('role', (c) => c.setDefault('operator')).execute()
  await db.schema.createIndex('users_username_lower_key').unique().on('users').expression(sql`lower(username)`).execute()
  // Ending every session of a user (disable, delete, password change) finds them by user.
  await db.schema.createIndex('sessions_user_id_idx').on('sessions').column('user_id').execute()

  await db.schema.createTable('api_tokens')
    .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
    .addColumn('user_id', 'bigint', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('token_hash', 'bytea', (c) => c.notNull().unique())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('last_used_at', 'timestamptz')
    .addColumn('expires_at', 'timestamptz')
    .execute()
  await db.schema.createIndex('api_tokens_user_id_idx').on('api_tokens').column('user_id').execute()

  await db.schema.createTable('audit')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('actor', 'text')
    .addColumn('address', 'text')
    .addColumn('node', 'text', (c) => c.notNull())
    .addColumn('targets', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addColumn('details', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .execute()
  await db.schema.createIndex('audit_at_idx').on('audit').column('at').execute()
}

export async function down (db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('audit').execute()
  await db.schema.dropTable('api_tokens').execute()
  await db.schema.dropIndex('sessions_user_id_idx').execute()
  await db.schema.dropIndex('users_username_lower_key').execute()
  await db.schema.alterTable('users').dropColumn('updated_at').dropColumn('disabled_at').dropColumn('role').execute()
}
