import { sql, type Kysely } from 'kysely'

// Frozen in time: never import application code here.

/**
 * `polling_reaktors.blocked`: a run of the reaktor passed its timeout and has not settled yet (its
 * aktor ignores its signal), so no other run of it starts until it does. Set by the node running
 * it at the timeout, cleared when the run settles or when another node takes its partition over.
 * The partial index serves that takeover ("the blocked reaktors of these partitions"), which is
 * nearly always empty.
 */
export async function up (db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('polling_reaktors')
    .addColumn('blocked', 'boolean', (c) => c.notNull().defaultTo(false))
    .execute()
  await sql`create index polling_reaktors_blocked_partition_idx on polling_reaktors (partition) where blocked`.execute(db)
}

export async function down (db: Kysely<any>): Promise<void> {
  await sql`drop index if exists polling_reaktors_blocked_partition_idx`.execute(db)
  await db.schema.alterTable('polling_reaktors').dropColumn('blocked').execute()
}
