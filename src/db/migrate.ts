import { Migrator, sql, type Kysely, type MigrationResultSet } from 'kysely'
import { migrations } from './migrations/index.js'

function migrator (db: Kysely<any>): Migrator {
  return new Migrator({ db, provider: { getMigrations: async () => migrations } })
}

/**
 * Brings the schema to the latest migration. Kysely's Migrator takes a transaction-scoped advisory
 * lock, so several nodes starting at once apply each migration exactly once.
 */
export async function migrateToLatest (db: Kysely<any>): Promise<MigrationResultSet> {
  const result = await migrator(db).migrateToLatest()
  if (result.error !== undefined) {
    const failed = result.results?.find((r) => r.status === 'Error')
    throw new Error(`database migration${failed === undefined ? '' : ` ${failed.migrationName}`} failed: ${String((result.error as Error)?.message ?? result.error)}`)
  }
  return result
}

/**
 * True when every known migration has been applied (for /readyz, on every probe): one indexed
 * query, not the Migrator's catalog introspection. Throws when the database cannot be reached.
 */
export async function migrationsApplied (db: Kysely<any>): Promise<boolean> {
  const names = Object.keys(migrations)
  try {
    const { rows } = await sql<{ applied: number }>`select count(*)::int as applied from kysely_migration where name = any(${names})`.execute(db)
    return rows[0]?.applied === names.length
  } catch (err) {
    // 42P01 undefined_table: no migration has ever run here.
    if ((err as { code?: string }).code === '42P01') return false
    throw err
  }
}
