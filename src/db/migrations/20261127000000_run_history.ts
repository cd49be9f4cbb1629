import { sql, type Kysely } from 'kysely'

// Frozen in time: never import application code here.

/**
 * Run history and the status columns that tell what the last runs did.
 *
 * `polling_runs`: one row per run, appended by the node that ran it in its batched flush and pruned
 * per reaktor in the background (RUN_HISTORY_PER_REAKTOR). `seq` orders runs that started in the
 * same microsecond (a `true` result starts the next run at once) and is the cursor's tie-breaker.
 * No foreign key to polling_reaktors: a flush must never fail (nor wait on a row lock) because of
 * history, and a reaktor's rows go with it only when it is no longer registered anyway.
 *
 * `polling_reaktors`: `last_success_at` / `last_failure_at` (when the last run that succeeded /
 * failed started), `last_duration_ms` and `last_outcome` of the latest run, and `running_since`
 * (a run in flight started then; written only for runs still in flight at a flush).
 */
export async function up (db: Kysely<any>): Promise<void> {
  // Two indexes per row, no more: the primary key serves the pages, the pruning and the ids with
  // history (reaktor_id first, then the order runs are shown in); run_id is unique for the upsert
  // of a timed-out run's row, and time-ordered (UUID version 7), so its index grows at one end.
  await sql`
    create table polling_runs (
      reaktor_id text not null,
      started_at timestamptz not null,
      seq bigint generated always as identity,
      run_id uuid not null unique,
      node text not null,
      duration_ms integer,
      outcome text not null check (outcome in ('more_work', 'no_work', 'failed', 'timed_out', 'aborted')),
      error text,
      primary key (reaktor_id, started_at, seq)
    )
  `.execute(db)
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
