import { ConfigError, loadConfig } from '../config.js'
import { startEmbeddedPostgres } from './embedded.js'
import { createDatabase } from './index.js'
import { migrateToLatest } from './migrate.js'

/** `npm run db:migrate`: applies pending migrations to DATABASE_URL (or the embedded database). */
async function main (): Promise<void> {
  const config = loadConfig(process.env)
  const log = { info: (_o: object, m: string) => console.log(m), warn: (_o: object, m: string) => console.warn(m) }
  const embedded = config.databaseUrl === undefined ? await startEmbeddedPostgres({ dataDir: config.dataDir, storeDir: config.embeddedPostgresDir, log }) : undefined
  const { db } = createDatabase(config.databaseUrl ?? embedded!.url, { bounded: false })
  try {
    const { results } = await migrateToLatest(db)
    for (const r of results ?? []) console.log(`${r.status}: ${r.migrationName}`)
    if ((results ?? []).length === 0) console.log('database schema is up to date')
  } finally {
    await db.destroy()
    await embedded?.stop()
  }
}

main().catch((err: Error) => {
  process.stderr.write(`reaktor-service: ${err instanceof ConfigError ? 'invalid configuration: ' : ''}${err.message}\n`)
  process.exit(1)
})
