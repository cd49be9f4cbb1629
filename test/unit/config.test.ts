import t from 'tap'
import { ConfigError, loadConfig } from '../../src/config.js'

t.test('defaults follow the configuration table of docs/configuration.md', async (t) => {
  const c = loadConfig({})
  t.equal(c.port, 3000)
  t.equal(c.host, '127.0.0.1')
  t.equal(c.databaseUrl, undefined)
  t.match(c.dataDir, /\/data$/)
  t.equal(c.embeddedPostgresDir, '/var/lib/reaktor-service')
  t.match(c.reaktorAppsDir, /\/reaktor-apps$/)
  t.equal(c.sessionTtlMs, 8 * 3600 * 1000)
  t.equal(c.logLevel, 'info')
  t.match(c.nodeId, /:\d+$/)
  t.equal(c.aktorBodyLimit, 1024 * 1024)
  t.equal(c.runHistoryPerReaktor, 100)
  t.equal(c.auditRetentionMs, 90 * 86_400_000)
})

t.test('AUDIT_RETENTION: 0 keeps forever; otherwise a duration from 1d to 36500d', async (t) => {
  t.equal(loadConfig({ AUDIT_RETENTION: '0' }).auditRetentionMs, 0)
  t.equal(loadConfig({ AUDIT_RETENTION: '0d' }).auditRetentionMs, 0)
  t.equal(loadConfig({ AUDIT_RETENTION: '24h' }).auditRetentionMs, 86_400_000)
  t.equal(loadConfig({ AUDIT_RETENTION: '400d' }).auditRetentionMs, 400 * 86_400_000)
  t.equal(loadConfig({ AUDIT_RETENTION: '36500d' }).auditRetentionMs, 36_500 * 86_400_000)
})

t.test('RUN_HISTORY_PER_REAKTOR: 0 (off) up to 100000', async (t) => {
  t.equal(loadConfig({ RUN_HISTORY_PER_REAKTOR: '0' }).runHistoryPerReaktor, 0)
  t.equal(loadConfig({ RUN_HISTORY_PER_REAKTOR: '100000' }).runHistoryPerReaktor, 100_000)
})

t.test('valid values are read', async (t) => {
  const c = loadConfig({
    PORT: '8080', HOST: '0.0.0.0', DATABASE_URL: 'postgres://u:p@db:5432/x', SESSION_TTL: '30m', NODE_ID: 'n1',
    LOG_LEVEL: 'warn', ADMIN_USERNAME: 'root', ADMIN_PASSWORD: 'correct horse', TRUST_PROXY: 'true',
    EMBEDDED_POSTGRES_DIR: '/srv/reaktor-pg'
  })
  t.equal(c.port, 8080)
  t.equal(c.embeddedPostgresDir, '/srv/reaktor-pg')
  t.equal(c.host, '0.0.0.0')
  t.equal(c.databaseUrl, 'postgres://u:p@db:5432/x')
  t.equal(c.sessionTtlMs, 30 * 60 * 1000)
  t.equal(c.nodeId, 'n1')
  t.equal(c.trustProxy, true)
  t.equal(c.adminUsername, 'root')
})

t.test('TRUST_PROXY: off, any proxy, a hop count, or proxy addresses', async (t) => {
  t.equal(loadConfig({}).trustProxy, false)
  t.equal(loadConfig({ TRUST_PROXY: 'false' }).trustProxy, false)
  t.equal(loadConfig({ TRUST_PROXY: 'true' }).trustProxy, true)
  t.equal(loadConfig({ TRUST_PROXY: '1' }).trustProxy, 1)
  t.same(loadConfig({ TRUST_PROXY: '10.0.0.1, 10.1.0.0/16,loopback' }).trustProxy, ['10.0.0.1', '10.1.0.0/16', 'loopback'])
})

t.test('ALLOWED_HOSTS: unset answers every Host; a list of hosts with optional ports, lower-cased', async (t) => {
  t.equal(loadConfig({}).allowedHosts, undefined)
  t.same(loadConfig({ ALLOWED_HOSTS: 'Service.Example, 127.0.0.1:3000,[::1]' }).allowedHosts, ['service.example', '127.0.0.1:3000', '[::1]'])
})

const bad: Array<[Record<string, string>, string, RegExp]> = [
  [{ PORT: 'abc' }, 'PORT', /integer from 0 to 65535/],
  [{ PORT: '70000' }, 'PORT', /integer/],
  [{ SESSION_TTL: '5 parsecs' }, 'SESSION_TTL', /ms, s, m, h or d/],
  [{ SESSION_TTL: '0s' }, 'SESSION_TTL', /greater than zero/],
  [{ DATABASE_URL: 'not a url' }, 'DATABASE_URL', /postgres:\/\//],
  [{ DATABASE_URL: 'mysql://x@y/z' }, 'DATABASE_URL', /protocol/],
  [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL', /one of fatal, error/],
  [{ ADMIN_USERNAME: 'root' }, 'ADMIN_PASSWORD', /set together/],
  [{ ADMIN_USERNAME: 'root', ADMIN_PASSWORD: 'short' }, 'ADMIN_PASSWORD', /at least 8/],
  [{ TRUST_PROXY: 'maybe' }, 'TRUST_PROXY', /hop count/],
  [{ ALLOWED_HOSTS: 'a.example,,b.example' }, 'ALLOWED_HOSTS', /separated by commas/],
  [{ ALLOWED_HOSTS: 'https://a.example' }, 'ALLOWED_HOSTS', /host names or addresses/],
  [{ ALLOWED_HOSTS: 'a.example/path' }, 'ALLOWED_HOSTS', /host names or addresses/],
  [{ AKTOR_BODY_LIMIT: '1MB' }, 'AKTOR_BODY_LIMIT', /integer/],
  [{ RUN_HISTORY_PER_REAKTOR: '-1' }, 'RUN_HISTORY_PER_REAKTOR', /integer from 0 to 100000/],
  [{ RUN_HISTORY_PER_REAKTOR: '100001' }, 'RUN_HISTORY_PER_REAKTOR', /integer from 0 to 100000/],
  [{ AUDIT_RETENTION: '90' }, 'AUDIT_RETENTION', /0 \(keep forever\) or a duration from 1d to 36500d/],
  [{ AUDIT_RETENTION: 'forever' }, 'AUDIT_RETENTION', /0 \(keep forever\) or a duration/],
  [{ AUDIT_RETENTION: '-1d' }, 'AUDIT_RETENTION', /0 \(keep forever\) or a duration/],
  [{ AUDIT_RETENTION: '90m' }, 'AUDIT_RETENTION', /from 1d to 36500d/],
  [{ AUDIT_RETENTION: '36501d' }, 'AUDIT_RETENTION', /from 1d to 36500d/]
]
for (const [env, variable, detail] of bad) {
  t.test(`${JSON.stringify(env)} names ${variable}`, async (t) => {
    try {
      loadConfig(env)
      t.fail('should have thrown')
    } catch (err) {
      t.ok(err instanceof ConfigError)
      t.equal((err as ConfigError).variable, variable)
      t.match((err as Error).message, new RegExp(`^${variable}: `))
      t.match((err as Error).message, detail)
    }
  })
}
