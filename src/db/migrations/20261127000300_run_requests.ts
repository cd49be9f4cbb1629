import type { Kysely } from 'kysely'

// Frozen in time: never import application code here.

/**
 * `polling_reaktors.run_requested_at`: when a run of the reaktor was last requested through
 * `POST /api/v1/polling/{id}/run`. A request is still pending while this is later than `last_run`
 * (the start of the last run): a run that started before the request does not serve it, so its
 * result, flushed after the request, must not push `next_run` past the request.
 */
export async function up (db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('polling_reaktors').addColumn('run_requested_at', 'timestamptz').execute()
}

export async function down (db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('polling_reaktors').dropColumn('run_requested_at').execute()
}
