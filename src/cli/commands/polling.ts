import { Command, InvalidArgumentError, Option } from 'commander'
import { CliError, EXIT, type CliContext, type CommandModule } from '../context.js'
import { ReaktorList, type ListQuery } from '../../polling/list-page.js'
import { HISTORY_LIMIT, LIST_LIMIT } from '../../schemas/page-limits.js'
import type { PollingStatusType } from '../../schemas/polling.js'
import type { ApiClient } from '../client.js'
import { formatFields, formatTable, printable, printJson, shellWord, type Column } from '../output.js'

/** A polling status as `GET /api/v1/polling` answers it (the fields the CLI shows). */
interface Status {
  reaktorDefinitionId: string
  app: string
  state: string
  interval: string
  effectiveInterval: string
  lastRun: string | null
  nextRun: string | null
  updatedAt: string | null
  label?: string | null
  description?: string | null
  autoStart: boolean
  lastError: string | null
  consecutiveFailures: number
  blocked: boolean
  owner: string | null
  lastSuccessAt: string | null
  lastFailureAt: string | null
  lastDurationMs: number | null
  lastOutcome: string | null
  runningSince: string | null
}

interface Run { runId: string, node: string, startedAt: string, durationMs: number | null, outcome: string, error: string | null }
interface BulkAnswer { action: string, results: Array<{ reaktorDefinitionId: string, result: string }>, changed: number, unchanged: number, notFound: string[] }

const STATES = ['running', 'stopped']

/** `reaktor polling list|status|start|stop|run|runs`. */
export const pollingCommands: CommandModule = (program, context) => {
  const polling = program.command('polling')
    .description('list, inspect, start, stop and run polling reaktors, and read their run history')
    .addHelpText('after', `
Example:
  $ reaktor polling list --state running`)

  polling.command('list')
    .description('the polling reaktors, sorted by id')
    .addOption(new Option('--state <state>', 'only those in this state').choices(STATES))
    .option('--failing', 'only those whose last runs failed (consecutive failures above 0)')
    .option('--app <name>', 'only those of this app (its name, exact)')
    .option('-q, --query <text>', 'only those whose id, label or app name contains the text (any case)')
    .addHelpText('after', `
The filters are the list API's own (GET /api/v1/polling?state=&failing=true&app=&q=).
--json prints {"pollingReaktors": [...]}: every matching reaktor, sorted by id.

Example:
  $ reaktor polling list --failing --app drain-demo`)
    .action(async (options: { state?: string, failing?: boolean, app?: string, query?: string }) => {
      const rows = await listReaktors(await context.api(), { q: options.query, state: options.state, failing: options.failing === true ? 'true' : undefined, app: options.app })
      if (context.json()) return printJson(context.io, { pollingReaktors: rows })
      const time = timeFormat(context)
      const columns: Array<Column<Status>> = [
        { header: 'ID', value: (s) => s.reaktorDefinitionId },
        { header: 'APP', value: (s) => s.app },
        { header: 'STATE', value: (s) => s.state + (s.blocked ? ' (blocked)' : '') },
        { header: 'INTERVAL', value: (s) => s.effectiveInterval },
        { header: 'LAST RUN', value: (s) => time(s.lastRun) },
        { header: 'OUTCOME', value: (s) => s.lastOutcome },
        { header: 'NEXT RUN', value: (s) => time(s.nextRun) },
        { header: 'FAILURES', value: (s) => s.consecutiveFailures },
        { header: 'OWNER', value: (s) => s.owner }
      ]
      context.io.stdout.write(formatTable(rows, columns))
    })

  polling.command('status')
    .description('one polling reaktor\'s status')
    .argument('<id>', 'the reaktor id')
    .addHelpText('after', `
Example:
  $ reaktor polling status drain-demo`)
    .action(async (id: string) => {
      const status = await (await context.api()).request<Status>('GET', `/polling/${encodeURIComponent(id)}/status`)
      if (context.json()) return printJson(context.io, status)
      const time = timeFormat(context)
      context.io.stdout.write(formatFields([
        ['id', status.reaktorDefinitionId],
        ['app', status.app],
        ['label', status.label],
        ['state', status.state],
        ['blocked', status.blocked],
        ['auto start', status.autoStart],
        ['interval', status.interval === status.effectiveInterval ? status.interval : `${status.interval} (runs every ${status.effectiveInterval})`],
        ['owner', status.owner],
        ['running since', time(status.runningSince)],
        ['last run', time(status.lastRun)],
        ['last outcome', status.lastOutcome],
        ['last duration', status.lastDurationMs === null ? null : `${status.lastDurationMs}ms`],
        ['last success', time(status.lastSuccessAt)],
        ['last failure', time(status.lastFailureAt)],
        ['last error', status.lastError],
        ['failures', status.consecutiveFailures],
        ['next run', time(status.nextRun)],
        ['updated', time(status.updatedAt)]
      ]))
    })

  for (const action of ['start', 'stop'] as const) {
    polling.command(action)
      .description(`${action} polling reaktors: by id, or every one of an app`)
      .argument('[ids...]', 'the reaktor ids')
      .option('--app <name>', `${action} every polling reaktor of this app (instead of ids)`)
      .addHelpText('after', `
One id uses the single route; several ids or --app change them all in one transaction.
Ids the service does not know are listed on stderr, and the exit code is 3 (the others still ${action === 'start' ? 'start' : 'stop'}).

Example:
  $ reaktor polling ${action} drain-demo
  $ reaktor polling ${action} --app drain-demo`)
      .action(async (given: string[], options: { app?: string }, command: Command) => {
        if ((given.length === 0) === (options.app === undefined)) command.error('error: give reaktor ids or --app <name>, not both', { exitCode: EXIT.usage })
        // An id named twice (ids pasted from a list) means it once: the bulk route refuses repeats.
        const ids = [...new Set(given)]
        const api = await context.api()
        if (options.app === undefined && ids.length === 1) {
          const answer = await api.request<{ message: string }>('POST', `/polling/${encodeURIComponent(ids[0])}/${action}`)
          if (context.json()) return printJson(context.io, answer)
          context.io.stdout.write(`${printable(answer.message)}\n`)
          return
        }
        const answer = await api.request<BulkAnswer>('POST', `/polling/${action}`, { body: options.app === undefined ? { ids } : { app: options.app } })
        if (context.json()) printJson(context.io, answer)
        else {
          context.io.stdout.write(formatTable(answer.results, [
            { header: 'ID', value: (r) => r.reaktorDefinitionId },
            { header: 'RESULT', value: (r) => r.result }
          ]))
          context.io.stdout.write(`${answer.changed} changed, ${answer.unchanged} unchanged, ${answer.notFound.length} not found\n`)
        }
        if (answer.notFound.length > 0) throw new CliError(EXIT.notFound, `not registered: ${answer.notFound.join(', ')}`)
      })
  }

  polling.command('run')
    .description('run a running polling reaktor now (a stopped one is not started)')
    .argument('<id>', 'the reaktor id')
    .addHelpText('after', `
Example:
  $ reaktor polling run drain-demo`)
    .action(async (id: string) => {
      const answer = await (await context.api()).request<{ message: string }>('POST', `/polling/${encodeURIComponent(id)}/run`)
      if (context.json()) return printJson(context.io, answer)
      context.io.stdout.write(`${printable(answer.message)}\n`)
    })

  polling.command('runs')
    .description('a polling reaktor\'s recorded runs, newest first')
    .argument('<id>', 'the reaktor id')
    .addOption(new Option('--limit <n>', `how many runs (${HISTORY_LIMIT.min} to ${HISTORY_LIMIT.max}; the service's default: ${HISTORY_LIMIT.default})`).argParser(runsLimit))
    .option('--before <cursor>', 'the next page: the cursor a previous call printed (or an ISO 8601 date-time)')
    .addHelpText('after', `
--json prints the API's answer, {"runs": [...], "nextBefore": <cursor or null>}.
When there are older runs, the command for the next page is printed on stderr.

Example:
  $ reaktor polling runs drain-demo --limit 50`)
    .action(async (id: string, options: { limit?: number, before?: string }) => {
      const answer = await (await context.api()).request<{ runs: Run[], nextBefore: string | null }>('GET', `/polling/${encodeURIComponent(id)}/runs`, { query: { limit: options.limit, before: options.before } })
      if (context.json()) printJson(context.io, answer)
      else {
        const time = timeFormat(context)
        context.io.stdout.write(formatTable(answer.runs, [
          { header: 'STARTED', value: (r) => time(r.startedAt) },
          { header: 'OUTCOME', value: (r) => r.outcome },
          { header: 'DURATION', value: (r) => r.durationMs === null ? null : `${r.durationMs}ms` },
          { header: 'NODE', value: (r) => r.node },
          { header: 'ERROR', value: (r) => r.error }
        ]))
      }
      if (answer.nextBefore !== null) {
        const limit = options.limit === undefined ? '' : ` --limit ${options.limit}`
        context.io.stderr.write(`more: reaktor polling runs ${shellWord(id)}${limit} --before ${shellWord(answer.nextBefore)}\n`)
      }
    })
}

/**
 * The reaktors matching `filters`, sorted by id, from one read of the service: filtered by the
 * service (so the filters mean what the API's do, and a few matches among thousands of reaktors
 * cost one small answer); more matches than one page holds come from the whole list, filtered here
 * by the service's own code, rather than from several pages that could shift between requests.
 */
async function listReaktors (api: ApiClient, filters: { q?: string, state?: string, failing?: 'true', app?: string }): Promise<Status[]> {
  if (Object.values(filters).every((v) => v === undefined)) return (await api.request<{ pollingReaktors: Status[] }>('GET', '/polling')).pollingReaktors
  const page = await api.request<{ pollingReaktors: Status[], total: number }>('GET', '/polling', { query: { ...filters, limit: LIST_LIMIT.max } })
  if (page.total <= page.pollingReaktors.length) return page.pollingReaktors
  const { pollingReaktors } = await api.request<{ pollingReaktors: PollingStatusType[] }>('GET', '/polling')
  return new ReaktorList(pollingReaktors).page({
    q: filters.q,
    state: filters.state as ListQuery['state'],
    failing: filters.failing === undefined ? undefined : true,
    app: filters.app,
    sort: 'id',
    order: 'asc',
    limit: pollingReaktors.length,
    offset: 0
  }).pollingReaktors as Status[]
}

function runsLimit (value: string): number {
  if (!/^[0-9]+$/.test(value) || Number(value) < HISTORY_LIMIT.min || Number(value) > HISTORY_LIMIT.max) {
    throw new InvalidArgumentError(`a whole number from ${HISTORY_LIMIT.min} to ${HISTORY_LIMIT.max}`)
  }
  return Number(value)
}

/**
 * Times as ISO 8601, which scripts and other time zones read alike; at a terminal (and without
 * --json) as "12s ago" / "in 4s", which is what an operator scanning a table wants.
 */
function timeFormat (context: CliContext): (iso: string | null | undefined) => string | null {
  if (context.io.stdout.isTTY !== true) return (iso) => iso ?? null
  const now = Date.now()
  return (iso) => iso === null || iso === undefined ? null : relativeTime(iso, now)
}

/** `iso` seen from `now`: "12s ago", "in 4s", "3m5s ago", "in 2h", "1d3h ago" (two units at most). */
export function relativeTime (iso: string, now: number): string {
  const ms = Date.parse(iso) - now
  const text = shortDuration(Math.abs(ms))
  return ms >= 0 ? `in ${text}` : `${text} ago`
}

function shortDuration (ms: number): string {
  const s = Math.round(ms / 1000)
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60 === 0 ? '' : `${s % 60}s`}`
  if (s < 86_400) return `${Math.floor(s / 3600)}h${Math.floor(s % 3600 / 60) === 0 ? '' : `${Math.floor(s % 3600 / 60)}m`}`
  return `${Math.floor(s / 86_400)}d${Math.floor(s % 86_400 / 3600) === 0 ? '' : `${Math.floor(s % 86_400 / 3600)}h`}`
}
