import { ConfigError } from '../config.js'
import { migrateDatabase } from './migrate-database.js'

/** `npm run db:migrate`: applies pending migrations to DATABASE_URL (or the embedded database). */
async function main (): Promise<void> {
  const applied = await migrateDatabase(process.env, { info: (line) => console.log(line), warn: (line) => console.warn(line) })
  for (const r of applied) console.log(`${r.status}: ${r.migrationName}`)
  if (applied.length === 0) console.log('database schema is up to date')
}

main().catch((err: Error) => {
  process.stderr.write(`reaktor-service: ${err instanceof ConfigError ? 'invalid configuration: ' : ''}${err.message}\n`)
  process.exit(1)
})
