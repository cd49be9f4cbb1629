import { sql, type Kysely } from 'kysely'

// Frozen in time: never import application code here.

/**
 * Published reaktor apps, the cluster's one source of truth for them: every version's package (the
 * npm tarball as uploaded, immutable once stored), each app's active version, and what each node
 * runs of each app (so that the API can say whether every node switched).
 */
export async function up (db: Kysely<any>): Promise<void> {
  await db.schema.createTable('app_packages')
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('version', 'text', (c) => c.notNull())
    // Hex SHA-256 of `bytes`: what a node checks after fetching, and what tells a republish of the
    // same bytes (a no-op) from other bytes under a stored version (refused).
    .addColumn('sha256', 'text', (c) => c.notNull())
    .addColumn('size', 'integer', (c) => c.notNull())
    .addColumn('unpacked_size', 'bigint', (c) => c.notNull())
    .addColumn('entries', 'integer', (c) => c.notNull())
    // The package's package.json as read from the archive.
    .addColumn('manifest', 'jsonb', (c) => c.notNull())
    .addColumn('bytes', 'bytea', (c) => c.notNull())
    .addColumn('published_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('published_by', 'text')
    .addPrimaryKeyConstraint('app_packages_pkey', ['name', 'version'])
    .execute()
  // Large packages stay out of the table's main heap pages: listing versions never reads them.
  await sql`alter table app_packages alter column bytes set storage external`.execute(db)

  await db.schema.createTable('apps')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('active_version', 'text', (c) => c.notNull())
    .addColumn('changed_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('changed_by', 'text')
    // The active version is a stored one: deleting it is refused by the API, and by this key.
    .addForeignKeyConstraint('apps_active_fkey', ['name', 'active_version'], 'app_packages', ['name', 'version'])
    .execute()

  await db.schema.createTable('app_node_states')
    .addColumn('node_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    // What the node runs (null: none, e.g. the first version it was given failed to load).
    .addColumn('version', 'text')
    .addColumn('since', 'timestamptz')
    // Why the node does not run the active version, when it does not.
    .addColumn('error', 'text')
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('app_node_states_pkey', ['node_id', 'name'])
    .execute()
}

export async function down (db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('app_node_states').execute()
  await db.schema.dropTable('apps').execute()
  await db.schema.dropTable('app_packages').execute()
}
