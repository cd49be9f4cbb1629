import pino from 'pino'
import type { FastifyInstance } from 'fastify'
import { buildApp, loggerOptions } from '../../src/app.js'
import { testConfig } from './app.js'
import { ADMIN_ENV } from './auth.js'
import type { TestContext } from './context.js'
import { createTestDatabase } from './database.js'
import { logOutput } from './log.js'
import { FAST_SCHEDULER, probe } from './scheduler.js'

export interface AuditService {
  app: FastifyInstance
  databaseUrl: string
  /** Every line of the service's log at info and above, as written (audit lines among them). */
  lines: string[]
}

/**
 * The service as production builds it, with `ADMIN_ENV` (plus `env`), a fresh database, its real
 * logger at info into `lines`, and the app `audit-app` of two hourly reaktors `a` and `b`.
 */
export async function auditService (t: TestContext, env: Record<string, string> = {}): Promise<AuditService> {
  const config = await testConfig(t, { ...ADMIN_ENV, ...env })
  const databaseUrl = await createTestDatabase(t)
  const { stream, lines } = logOutput()
  const app = await buildApp({
    config,
    databaseUrl,
    logger: pino({ ...loggerOptions(config), level: 'info' }, stream),
    apps: [{ name: 'audit-app', version: '1.0.0', pollingReaktors: ['a', 'b'].map((id) => probe(id, () => false, { interval: '1h' }).registration) }],
    scheduler: FAST_SCHEDULER
  })
  t.teardown(async () => await app.close())
  return { app, databaseUrl, lines }
}
