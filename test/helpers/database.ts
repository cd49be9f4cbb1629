import { randomBytes } from 'node:crypto'
import pg from 'pg'
import type { TestContext } from './test-context.js'

/** The same server, another database. */
export function databaseUrlFor (url: string, database: string): string {
  const u = new URL(url)
  u.pathname = `/${encodeURIComponent(database)}`
  return u.toString()
}

function adminUrl (): string {
  const url = process.env.TEST_ADMIN_DATABASE_URL
  if (url === undefined || url === '') throw new Error('run the tests with `npm test` (it provides the test database)')
  return url
}

async function admin<T> (fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl() })
  await client.connect()
  try {
    return await fn(client)
  } finally {
    await client.end()
  }
}

/** A database of one test's own, created as `create database … <clause>`; dropped at teardown. */
async function ownDatabase (t: TestContext, prefix: string, clause: string): Promise<string> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`
  await admin(async (c) => await c.query(`create database ${name} ${clause}`))
  t.teardown(async () => {
    await admin(async (c) => await c.query(`drop database if exists ${name} with (force)`))
  })
  return databaseUrlFor(adminUrl(), name)
}

/** A fresh, migrated database for one test (cloned from the run's template); dropped at teardown. */
export async function createTestDatabase (t: TestContext): Promise<string> {
  return await ownDatabase(t, 'reaktor_test', `template ${process.env.TEST_TEMPLATE_DATABASE ?? ''}`)
}

/** An empty database (no migration applied) for one test; dropped at teardown. */
export async function createEmptyDatabase (t: TestContext): Promise<string> {
  return await ownDatabase(t, 'reaktor_test_empty', '')
}
