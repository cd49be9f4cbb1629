import { sql, type Kysely } from 'kysely'

// Frozen in time: never import application code here.

/**
 * Run history and the status columns that tell what the last runs did.
 *
 * `polling_runs`: one row per run, appended by the node that ran it in its batched flush and pruned
 * per reaktor in the background (RUN_HISTORY_PER_REAKTOR). `seq` orders runs that started in the
 * same millisecond (a `true` result starts the next run at once) and is the cursor's tie-breaker.
 * No foreign key to polling_reaktors: a flush must never fail (nor wait on a row lock) because of
 * history, and a reaktor's rows go with it only when it is no longer registered anyway.
 *
 * `polling_reaktors`: `last_success_at` / `last_failure_at` (when the last run that succeeded /
 * failed started), `last_duration_ms` and `last_outcome` of the latest run, and `running_since`
 * (a run in flight started then; written only for runs still in flight at a flush).
 */
export async function up (db: Kysely<any>): Promise<void> {
  await sql`
    create table polling_runs (
      seq bigint generated always as identity primary key,
      run_id uuid not null unique,
      reaktor_id text not null,
      node text not null,
      started_at timestamptz not null,
      duration_ms integer,
      outcome text not null check (outcome in ('more_work', 'no_work', 'failed', 'timed_out', 'aborted')),
      error text
    )
  `.execute(db)
  await sql`create index polling_runs_reaktor_started_idx on polling_runs (reaktor_id, started_at desc, seq desc)`.execute(db)
  await db.schema.alterTable('polling_reaktors')
    .addColumn('last_success_at', 'timestamptz')
    .addColumn('last_failure_at', 'timestamptz')
    .addColumn('last_duration_ms', 'integer')
    .addColumn('last_outcome', 'text')
    .addColumn('running_since', 'timestamptz')
    .execute()
}

export async function down (db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('polling_reaktors')
    .dropColumn('last_success_at')
    .dropColumn('last_failure_at')
    .dropColumn('last_duration_ms')
    .dropColumn('last_outcome')
    .dropColumn('running_since')
    .execute()
  await sql`drop table if exists polling_runs`.execute(db)
}
