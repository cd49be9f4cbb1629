import type { Kysely } from 'kysely'

// Frozen in time: never import application code here.

/**
 * Scheduler bookkeeping on top of the state record:
 * - `state_version` grows with every state change (start/stop, restart rules). A batched run
 *   result carries the version its runner was started under and is applied only while it still
 *   matches, so a late flush can never undo a stop (or a stop + start) written meanwhile.
 * - `last_run_id` names the run behind `last_run` (with `owner`, makes overlaps detectable).
 */
export async function up (db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('polling_reaktors')
    .addColumn('state_version', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('last_run_id', 'text')
    .execute()
}

export async function down (db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('polling_reaktors').dropColumn('last_run_id').dropColumn('state_version').execute()
}
