import type { FastifyInstance } from 'fastify'
import { ADMIN_ENV, apiAs, apiLogin, loginToken } from './auth.js'
import { listeningApp } from './browser.js'
import { cliHome, runCli, runCliInProcess, type CliResult } from './cli.js'
import type { TestContext } from './test-context.js'

/** A listening service with ADMIN_ENV, a config home of its own, and the admin's login session. */
export interface CliService {
  app: FastifyInstance
  base: string
  home: string
  /** The admin's login session token. */
  admin: string
  /** `reaktor <args>` against this service as the holder of `token` (the admin's session unless told). */
  cli: (args: string[], opts?: { token?: string, stdin?: string }) => Promise<CliResult>
  /**
   * The same in this process (`main`, what bin/reaktor.js runs, without the process start): for
   * many short checks, where a process each would take a second or more.
   */
  inProcess: (args: string[], opts?: { token?: string, stdin?: string }) => Promise<CliResult>
  /** Whether `username` logs in with `password`. */
  logsIn: (username: string, password: string) => Promise<boolean>
  /** `GET /api/v1/users/{username}` as the admin. */
  user: (username: string) => Promise<{ statusCode: number, body: any }>
}

export async function cliService (t: TestContext): Promise<CliService> {
  const { app, base } = await listeningApp(t, { env: ADMIN_ENV })
  const home = await cliHome(t)
  const admin = await loginToken(app)
  const env = (token = admin): Record<string, string> => ({ XDG_CONFIG_HOME: home, REAKTOR_URL: base, REAKTOR_TOKEN: token })
  return {
    app,
    base,
    home,
    admin,
    cli: async (args, opts = {}) => await runCli(args, { env: env(opts.token), stdin: opts.stdin }),
    inProcess: async (args, opts = {}) => await runCliInProcess(args, { env: env(opts.token), stdin: opts.stdin }),
    logsIn: async (username, password) => (await apiLogin(app, { username, password })).statusCode === 200,
    user: async (username) => await apiAs(app, admin)('GET', `/api/v1/users/${encodeURIComponent(username)}`)
  }
}
