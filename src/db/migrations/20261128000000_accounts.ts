import { sql, type Kysely } from 'kysely'

// Frozen in time: never import application code here.

/**
 * Accounts: roles and disabling on `users`, API tokens for scripts, and the audit table.
 *
 * - `users.role`: existing users were all admins (the first-run admin, ADMIN_USERNAME); new ones
 *   default to operator. Usernames become unique without regard to case through `username_key`
 *   (trimmed, NFC, lower case as JavaScript maps it: every script, not only ASCII as `lower()` in a
 *   database of the C locale does); a database holding two names with the same key cannot take
 *   this migration, and says which.
 * - `api_tokens`: like sessions, only the SHA-256 of the token is stored; revoking deletes the row.
 * - `audit`: one row per privileged action, newest read first by id; pruned by `at`.
 */
export async function up (db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('users')
    .addColumn('role', 'text', (c) => c.notNull().defaultTo('admin').check(sql`role in ('admin', 'operator')`))
    .addColumn('disabled_at', 'timestamptz')
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute()
  await db.schema.alterTable('users').alterColumn('role', (c) => c.setDefault('operator')).execute()
  await db.schema.alterTable('users').addColumn('username_key', 'text').execute()
  const users = await db.selectFrom('users').select(['id', 'username']).execute()
  const seen = new Map<string, string>()
  for (const { id, username } of users) {
    // The same rule as the service's usernameKey (src/lib/user-rules.ts), frozen here.
    const key = (username as string).trim().normalize('NFC').toLowerCase()
    const other = seen.get(key)
    if (other !== undefined) {
      throw new Error(`users: ${JSON.stringify(other)} and ${JSON.stringify(username)} differ only in case or spaces; rename all but one before upgrading`)
    }
    seen.set(key, username as string)
    await db.updateTable('users').set({ username_key: key }).where('id', '=', id).execute()
  }
  await db.schema.alterTable('users').alterColumn('username_key', (c) => c.setNotNull()).execute()
  await db.schema.createIndex('users_username_key_unique').unique().on('users').column('username_key').execute()
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
  await db.schema.alterTable('users').dropColumn('username_key').dropColumn('updated_at').dropColumn('disabled_at').dropColumn('role').execute()
}
