import { hostname } from 'node:os'
import path from 'node:path'
import { parseDuration } from './lib/duration.js'
import { normalizeUsername, usernameProblem } from './lib/user-rules.js'

/** Every setting of the service, validated once at start (the table of docs/configuration.md). */
export interface Config {
  port: number
  host: string
  /** Unset: the service starts an embedded PostgreSQL under `dataDir/postgres`. */
  databaseUrl: string | undefined
  dataDir: string
  /**
   * As root only: where the embedded PostgreSQL's binaries and clusters go when the `postgres` user
   * cannot reach them in node_modules or DATA_DIR (see src/db/embedded-root.ts).
   */
  embeddedPostgresDir: string
  reaktorAppsDir: string
  /** CONSOLE (default true): the operator console, shipped with the service, served whatever REAKTOR_APPS_DIR holds. */
  consoleApp: boolean
  /** EXAMPLE_APPS (default false): also load the example apps shipped with the service (heartbeat, drain-demo). */
  exampleApps: boolean
  sessionTtlMs: number
  adminUsername: string | undefined
  adminPassword: string | undefined
  nodeId: string
  logLevel: string
  /**
   * Which reverse proxies' `X-Forwarded-*` headers to believe (client address for rate limits,
   * `Secure` cookies): false, true (any), a hop count, or proxy addresses/CIDRs. Passed to Fastify.
   */
  trustProxy: boolean | number | string[]
  /**
   * ALLOWED_HOSTS: the Host header values the service answers (lower case; an entry without a
   * port matches any port); undefined answers every Host.
   */
  allowedHosts: string[] | undefined
  /** Largest accepted aktor request body, in bytes. */
  aktorBodyLimit: number
  /** How long shutdown waits for in-flight runs and requests. */
  shutdownGraceMs: number
  /** Login attempts allowed per minute, per username and per client address. */
  loginRateLimit: number
  /**
   * Partitions of the cluster (PARTITIONS): fixed when the cluster's database is first used.
   * Unset: whatever the database stores (256 on a new one).
   */
  partitions: number | undefined
  /** RUN_HISTORY_PER_REAKTOR: run history rows kept per polling reaktor; 0 writes none. */
  runHistoryPerReaktor: number
  /** AUDIT_RETENTION: audit rows older than this are deleted; 0 keeps them forever. */
  auditRetentionMs: number
  /** Memory for the app-UI file cache (files and their gzip/brotli variants), in bytes. */
  appUiCacheBytes: number
  /** Published app packages: largest compressed size (413 above), unpacked size and entry count. */
  packageLimits: { maxBytes: number, maxUnpackedBytes: number, maxEntries: number }
  /**
   * The `REAKTOR_SETTING_*` variables: overrides of app settings (see src/apps/settings.ts for the
   * naming rule). Read here so that config stays the one place the environment is read.
   */
  appSettingsEnv: Readonly<Record<string, string>>
}

export class ConfigError extends Error {
  readonly code = 'REAKTOR_CONFIG'
  constructor (public readonly variable: string, detail: string) {
    super(`${variable}: ${detail}`)
    this.name = 'ConfigError'
  }
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']

/** EMBEDDED_POSTGRES_DIR unset; also what src/db/embedded.ts uses when given no store. */
export const DEFAULT_EMBEDDED_POSTGRES_DIR = '/var/lib/reaktor-service'
/** The largest PARTITIONS accepted (unset, the count stored in the cluster's database holds: src/scheduler/ownership/partitions.ts). */
export const MAX_PARTITIONS = 65_536

type Env = Record<string, string | undefined>

function read (env: Env, name: string): string | undefined {
  const value = env[name]
  return value === undefined || value === '' ? undefined : value
}

function integer (env: Env, name: string, fallback: number, min: number, max: number): number {
  return optionalInteger(env, name, min, max) ?? fallback
}

function optionalInteger (env: Env, name: string, min: number, max: number): number | undefined {
  const raw = read(env, name)
  if (raw === undefined) return undefined
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw new ConfigError(name, `${JSON.stringify(raw)} is not allowed; expected an integer from ${min} to ${max}`)
  }
  return Number(raw)
}

function duration (env: Env, name: string, fallback: string): number {
  const raw = read(env, name) ?? fallback
  let ms: number
  try {
    ms = parseDuration(raw)
  } catch {
    throw new ConfigError(name, `${JSON.stringify(raw)} is not allowed; expected an integer followed by ms, s, m, h or d (for example 8h)`)
  }
  if (ms <= 0) throw new ConfigError(name, `${JSON.stringify(raw)} is not allowed; the duration must be greater than zero`)
  return ms
}

/** A day: shorter retentions of the audit table are refused as likely typos (`90m` for `90d`). */
const MIN_AUDIT_RETENTION_MS = 86_400_000
/** 100 years: far beyond any policy, and well inside what PostgreSQL can subtract from now(). */
const MAX_AUDIT_RETENTION_MS = 36_500 * 86_400_000

function auditRetention (env: Env): number {
  const raw = read(env, 'AUDIT_RETENTION') ?? '90d'
  let ms: number | undefined
  try {
    // A bare 0 has no unit, which parseDuration requires.
    ms = raw === '0' ? 0 : parseDuration(raw)
  } catch {
    // Refused below, with the rule.
  }
  if (ms === 0) return 0
  if (ms === undefined || ms < MIN_AUDIT_RETENTION_MS || ms > MAX_AUDIT_RETENTION_MS) {
    throw new ConfigError('AUDIT_RETENTION', `${JSON.stringify(raw)} is not allowed; expected 0 (keep forever) or a duration from 1d to 36500d (an integer followed by ms, s, m, h or d, for example 90d)`)
  }
  return ms
}

/** A yes/no variable: true/yes or false/no (any case); unset: `fallback`. */
function flag (env: Env, name: string, fallback: boolean): boolean {
  const raw = read(env, name)
  if (raw === undefined) return fallback
  if (['true', 'yes'].includes(raw.toLowerCase())) return true
  if (['false', 'no'].includes(raw.toLowerCase())) return false
  throw new ConfigError(name, `${JSON.stringify(raw)} is not allowed; expected true or false`)
}

function trustProxy (env: Env): boolean | number | string[] {
  const raw = read(env, 'TRUST_PROXY')
  if (raw === undefined || ['false', 'no'].includes(raw.toLowerCase())) return false
  if (['true', 'yes'].includes(raw.toLowerCase())) return true
  if (/^\d+$/.test(raw) && Number(raw) <= 100) return Number(raw)
  const entries = raw.split(',').map((e) => e.trim())
  if (entries.every((e) => /^[0-9a-fA-F.:]+(\/\d{1,3})?$/.test(e) || ['loopback', 'linklocal', 'uniquelocal'].includes(e))) return entries
  throw new ConfigError('TRUST_PROXY', `${JSON.stringify(raw)} is not allowed; expected true, false, a hop count (1), or proxy addresses/CIDRs separated by commas (10.0.0.1,10.1.0.0/16, loopback)`)
}

function allowedHosts (env: Env): string[] | undefined {
  const raw = read(env, 'ALLOWED_HOSTS')
  if (raw === undefined) return undefined
  const entries = raw.split(',').map((e) => e.trim().toLowerCase())
  // A host name or IPv4 address, or a bracketed IPv6 address, with an optional port.
  const valid = /^(?:[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?|\[[0-9a-f:.]+\])(?::\d{1,5})?$/
  const bad = entries.find((e) => !valid.test(e))
  if (bad !== undefined) {
    throw new ConfigError('ALLOWED_HOSTS', `${JSON.stringify(bad)} is not allowed; expected host names or addresses with optional ports, separated by commas (service.example.com,127.0.0.1:3000,[::1])`)
  }
  return entries
}

function databaseUrl (env: Env): string | undefined {
  const raw = read(env, 'DATABASE_URL')
  if (raw === undefined) return undefined
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new ConfigError('DATABASE_URL', 'not a valid URL; expected postgres://user:password@host:port/database')
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new ConfigError('DATABASE_URL', `protocol ${JSON.stringify(url.protocol)} is not allowed; expected postgres:// or postgresql://`)
  }
  return raw
}

/** Reads and validates the environment. Throws a ConfigError naming the first bad variable. */
export function loadConfig (env: Env = process.env): Config {
  const logLevel = read(env, 'LOG_LEVEL') ?? 'info'
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError('LOG_LEVEL', `${JSON.stringify(logLevel)} is not allowed; expected one of ${LOG_LEVELS.join(', ')}`)
  }
  const rawAdminUsername = read(env, 'ADMIN_USERNAME')
  const adminPassword = read(env, 'ADMIN_PASSWORD')
  // The rules of every username (docs/accounts.md "Users and roles"); the password keeps its own, older rule.
  const adminProblem = rawAdminUsername === undefined ? null : usernameProblem(rawAdminUsername)
  if (adminProblem !== null) throw new ConfigError('ADMIN_USERNAME', adminProblem.replace(/^username: /, ''))
  const adminUsername = rawAdminUsername === undefined ? undefined : normalizeUsername(rawAdminUsername)
  if ((adminUsername === undefined) !== (adminPassword === undefined)) {
    throw new ConfigError(adminUsername === undefined ? 'ADMIN_USERNAME' : 'ADMIN_PASSWORD', 'ADMIN_USERNAME and ADMIN_PASSWORD must be set together')
  }
  if (adminPassword !== undefined && adminPassword.length < 8) {
    throw new ConfigError('ADMIN_PASSWORD', 'too short; expected at least 8 characters')
  }
  const host = read(env, 'HOST') ?? '127.0.0.1'
  if (/\s/.test(host)) throw new ConfigError('HOST', `${JSON.stringify(host)} is not allowed; expected an address or host name`)
  return {
    port: integer(env, 'PORT', 3000, 0, 65535),
    host,
    databaseUrl: databaseUrl(env),
    dataDir: path.resolve(read(env, 'DATA_DIR') ?? './data'),
    embeddedPostgresDir: path.resolve(read(env, 'EMBEDDED_POSTGRES_DIR') ?? DEFAULT_EMBEDDED_POSTGRES_DIR),
    reaktorAppsDir: path.resolve(read(env, 'REAKTOR_APPS_DIR') ?? './reaktor-apps'),
    consoleApp: flag(env, 'CONSOLE', true),
    exampleApps: flag(env, 'EXAMPLE_APPS', false),
    sessionTtlMs: duration(env, 'SESSION_TTL', '8h'),
    adminUsername,
    adminPassword,
    nodeId: read(env, 'NODE_ID') ?? `${hostname()}:${process.pid}`,
    logLevel,
    trustProxy: trustProxy(env),
    allowedHosts: allowedHosts(env),
    aktorBodyLimit: integer(env, 'AKTOR_BODY_LIMIT', 1024 * 1024, 1, 1024 * 1024 * 1024),
    shutdownGraceMs: duration(env, 'SHUTDOWN_GRACE', '10s'),
    loginRateLimit: integer(env, 'LOGIN_RATE_LIMIT', 10, 1, 100_000),
    partitions: optionalInteger(env, 'PARTITIONS', 1, MAX_PARTITIONS),
    runHistoryPerReaktor: integer(env, 'RUN_HISTORY_PER_REAKTOR', 100, 0, 100_000),
    auditRetentionMs: auditRetention(env),
    appUiCacheBytes: integer(env, 'APP_UI_CACHE_BYTES', 64 * 1024 * 1024, 0, 16 * 1024 * 1024 * 1024),
    packageLimits: {
      maxBytes: integer(env, 'APP_PACKAGE_MAX_BYTES', 64 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
      maxUnpackedBytes: integer(env, 'APP_PACKAGE_MAX_UNPACKED_BYTES', 256 * 1024 * 1024, 1024, 16 * 1024 * 1024 * 1024),
      maxEntries: integer(env, 'APP_PACKAGE_MAX_ENTRIES', 20_000, 1, 1_000_000)
    },
    appSettingsEnv: Object.freeze(Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[0].startsWith('REAKTOR_SETTING_') && e[1] !== undefined)))
  }
}
