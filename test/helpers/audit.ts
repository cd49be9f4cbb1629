import { buildLogged, type LoggedApp } from './app.js'
import { ADMIN_ENV } from './auth.js'
import type { TestContext } from './test-context.js'
import { probe } from './scheduler.js'

/** The service with `ADMIN_ENV` (plus `env`), its log kept, and the app `audit-app` of two hourly reaktors `a` and `b`. */
export async function auditService (t: TestContext, env: Record<string, string> = {}): Promise<LoggedApp> {
  return await buildLogged(t, { ...ADMIN_ENV, ...env }, [{ name: 'audit-app', version: '1.0.0', pollingReaktors: ['a', 'b'].map((id) => probe(id, () => false, { interval: '1h' }).registration) }])
}
