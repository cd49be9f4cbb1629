import { randomBytes } from 'node:crypto'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import type { FastifyInstance } from 'fastify'
import { buildApp, type AppOptions } from '../../src/app.js'
import { loadConfig, type Config } from '../../src/config.js'
import { databaseUrlFor } from './db-url.js'

/** The part of a tap Test these helpers use. */
export interface TestContext {
  teardown: (fn: () => unknown) => void
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

/** A fresh, migrated database for one test (cloned from the run's template); dropped at teardown. */
export async function createTestDatabase (t: TestContext): Promise<string> {
  const name = `reaktor_test_${randomBytes(6).toString('hex')}`
  await admin(async (c) => await c.query(`create database ${name} template ${process.env.TEST_TEMPLATE_DATABASE ?? ''}`))
  t.teardown(async () => {
    await admin(async (c) => await c.query(`drop database if exists ${name} with (force)`))
  })
  return databaseUrlFor(adminUrl(), name)
}

/** A temporary folder, removed at teardown. */
export async function tempDir (t: TestContext, prefix = 'reaktor-'): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix))
  t.teardown(async () => await fs.rm(dir, { recursive: true, force: true }))
  return dir
}

/** A validated config for tests: quiet, its own DATA_DIR, no apps unless given. */
export async function testConfig (t: TestContext, env: Record<string, string> = {}): Promise<Config> {
  const dataDir = await tempDir(t, 'reaktor-data-')
  return loadConfig({ LOG_LEVEL: 'silent', DATA_DIR: dataDir, REAKTOR_APPS_DIR: path.join(dataDir, 'no-apps'), NODE_ID: 'test-node', ...env })
}

export interface BuildOptions extends Partial<AppOptions> {
  env?: Record<string, string>
}

/** Builds the app as production does, on a fresh database; closed at teardown. */
export async function build (t: TestContext, opts: BuildOptions = {}): Promise<FastifyInstance> {
  const config = opts.config ?? await testConfig(t, opts.env)
  const databaseUrl = opts.databaseUrl ?? await createTestDatabase(t)
  const app = await buildApp({ ...opts, config, databaseUrl, logger: false })
  t.teardown(async () => await app.close())
  return app
}

/** Polls `check` until it returns a truthy value, or fails after `timeoutMs`. Never a blind sleep. */
export async function waitFor<T> (check: () => T | Promise<T>, { timeoutMs = 10_000, intervalMs = 20, what = 'condition' } = {}): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value !== undefined && value !== null && value !== false) return value as NonNullable<T>
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}
