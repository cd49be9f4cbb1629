import { sql, type Kysely } from 'kysely'

// Frozen in time: never import application code here.

/**
 * Partitioned ownership. Additive only: nodes of the previous version (one advisory lock per
 * reaktor) that are still running keep working on this schema until they are stopped; the new
 * version refuses to start while one of them is alive, and the previous version's migrator refuses
 * to start on a database that has this migration. So the two never run reaktors side by side.
 *
 * - `reaktor_cluster`: one row, written at the first start of the new version: the partition count
 *   of this cluster (fixed for its lifetime) and the name of the hash that maps ids to partitions.
 * - `reaktor_partitions`: one row per partition: the node that holds it (for status) and a
 *   generation that grows with every takeover: a late write of a node that has lost the partition
 *   carries an older generation and cannot move the schedule any more.
 * - `polling_reaktors.partition`: each reaktor's partition, written by the nodes that register it;
 *   indexed for "the running reaktors of these partitions".
 * - `reaktor_nodes`: what each live node registers (by its lock session), so that nodes loading
 *   different apps can tell which of them can run a partition.
 */
export async function up (db: Kysely<any>): Promise<void> {
  await db.schema.createTable('reaktor_cluster')
    .addColumn('id', 'smallint', (c) => c.primaryKey().defaultTo(1).check(sql`id = 1`))
    .addColumn('partitions', 'integer', (c) => c.notNull().check(sql`partitions between 1 and 65536`))
    .addColumn('partition_hash', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute()
  await db.schema.createTable('reaktor_partitions')
    .addColumn('partition', 'integer', (c) => c.primaryKey())
    .addColumn('generation', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('owner', 'text')
    .execute()
  await db.schema.alterTable('polling_reaktors').addColumn('partition', 'integer').execute()
  await sql`create index polling_reaktors_running_partition_idx on polling_reaktors (partition) where state = 'running'`.execute(db)
  await db.schema.createTable('reaktor_nodes')
    .addColumn('lock_pid', 'integer', (c) => c.primaryKey())
    .addColumn('node_id', 'text', (c) => c.notNull())
    .addColumn('fingerprint', 'text', (c) => c.notNull())
    .addColumn('registered', sql`text[]`, (c) => c.notNull())
    .addColumn('joined_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute()
}

export async function down (db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('reaktor_nodes').execute()
  await sql`drop index if exists polling_reaktors_running_partition_idx`.execute(db)
  await db.schema.alterTable('polling_reaktors').dropColumn('partition').execute()
  await db.schema.dropTable('reaktor_partitions').execute()
  await db.schema.dropTable('reaktor_cluster').execute()
}
