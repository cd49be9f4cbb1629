import { loadConfig } from '../config.js'
import { startEmbeddedPostgres } from '../db/embedded.js'
import { createDatabase } from '../db/index.js'
import { migrateToLatest } from '../db/migrate.js'

export interface AppliedMigration { migrationName: string, status: string }

/**
 * Applies pending migrations to the database the service would use with `env`: DATABASE_URL, or
 * else the embedded PostgreSQL of DATA_DIR (started for the run, stopped after): `reaktor migrate`
 * (and `npm run db:migrate`, its alias). Loaded only when that command runs, so that the other
 * commands start without the database code. `say` gets the embedded database's progress and warning lines.
 * Returns what was applied (empty: the schema was up to date); throws ConfigError or the failure.
 */
export async function migrateDatabase (env: Record<string, string | undefined>, say: { info: (line: string) => void, warn: (line: string) => void }): Promise<AppliedMigration[]> {
  const config = loadConfig(env)
  const log = { info: (_o: object, m: string) => say.info(m), warn: (_o: object, m: string) => say.warn(m) }
  const embedded = config.databaseUrl === undefined ? await startEmbeddedPostgres({ dataDir: config.dataDir, storeDir: config.embeddedPostgresDir, log }) : undefined
  const { db } = createDatabase(config.databaseUrl ?? embedded!.url, { bounded: false })
  try {
    const { results } = await migrateToLatest(db)
    return (results ?? []).map(({ migrationName, status }) => ({ migrationName, status }))
  } finally {
    await db.destroy()
    await embedded?.stop()
  }
}
