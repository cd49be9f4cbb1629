/**
 * `npm test` runs this: it provides one PostgreSQL for the whole run (DATABASE_URL when set,
 * otherwise an embedded server in a temporary folder), migrates a template database that every
 * test file clones, then runs tap and passes its exit code on.
 */
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/db/embedded.js'
import { createDatabase } from '../src/db/index.js'
import { migrateToLatest } from '../src/db/migrate.js'
import { databaseUrlFor } from './helpers/database.js'

const log = { info: () => {}, warn: (_o: object, m: string) => console.warn(m) }
let embedded: EmbeddedPostgres | undefined
let tmp: string | undefined
let adminUrl = process.env.DATABASE_URL
if (adminUrl === undefined || adminUrl === '') {
  tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'reaktor-test-'))
  embedded = await startEmbeddedPostgres({ dataDir: tmp, log })
  adminUrl = embedded.adminUrl
}

const template = `reaktor_test_template_${randomBytes(4).toString('hex')}`
const admin = new pg.Client({ connectionString: adminUrl })
await admin.connect()
await admin.query(`create database ${template}`)
const { db } = createDatabase(databaseUrlFor(adminUrl, template), { max: 1, bounded: false })
await migrateToLatest(db)
await db.destroy()

// tap compiles its plugin set (package.json "tap".plugin: tsx instead of its ts-node plugin) on
// first use; on a fresh install it would run this first suite with the defaults. Build it now.
const builtTap = path.resolve('node_modules/@tapjs/test/test-built/dist/esm/index.js')
if (!existsSync(builtTap) || readFileSync(builtTap, 'utf8').includes('@tapjs/typescript')) {
  spawnSync(path.resolve('node_modules/.bin/tap'), ['build'], { stdio: 'inherit' })
}

const tap = spawn(path.resolve('node_modules/.bin/tap'), process.argv.slice(2), {
  stdio: 'inherit',
  env: { ...process.env, TEST_ADMIN_DATABASE_URL: adminUrl, TEST_TEMPLATE_DATABASE: template, DATABASE_URL: '' }
})
const code: number = await new Promise((resolve) => tap.on('exit', (c, signal) => resolve(c ?? (signal !== null ? 1 : 0))))

await admin.query(`drop database if exists ${template} with (force)`).catch(() => {})
await admin.end()
await embedded?.stop()
if (tmp !== undefined) await fs.rm(tmp, { recursive: true, force: true })
process.exit(code)
