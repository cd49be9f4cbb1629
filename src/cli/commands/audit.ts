import { InvalidArgumentError, Option } from 'commander'
import { AUDIT_LIMIT } from '../../schemas/page-limits.js'
import type { CommandModule } from '../context.js'
import { formatTable, printJson, shellWord } from '../output.js'

interface AuditEntry { id: number, at: string, action: string, actor: string | null, address: string | null, node: string, targets: string[], details: Record<string, unknown> }
interface AuditPage { entries: AuditEntry[], nextBefore: string | null }

function limit (value: string): number {
  const n = Number(value)
  if (!/^\d+$/.test(value) || n < AUDIT_LIMIT.min || n > AUDIT_LIMIT.max) throw new InvalidArgumentError(`expected an integer from ${AUDIT_LIMIT.min} to ${AUDIT_LIMIT.max}`)
  return n
}

/** `reaktor audit` over `GET /api/v1/audit` (admins only). */
export const auditCommands: CommandModule = (program, context) => {
  const { io } = context
  program.command('audit')
    .description('the audit log, newest first (admins only); the command for the next, older page is printed on stderr')
    .option('--action <action>', 'only this action (exact), e.g. user.create, polling.stop, auth.login_failed')
    .option('--actor <username>', 'only this actor (without regard to case)')
    .addOption(new Option('--limit <n>', `entries per page, ${AUDIT_LIMIT.min} to ${AUDIT_LIMIT.max} (default ${AUDIT_LIMIT.default})`).argParser(limit))
    .option('--before <cursor>', 'only entries older than this: the cursor of the previous page')
    .addHelpText('after', '\nExamples:\n  reaktor audit --limit 20\n  reaktor audit --actor alice --action polling.stop\n  reaktor --json audit --action user.delete')
    .action(async (opts: { action?: string, actor?: string, limit?: number, before?: string }) => {
      const page = await (await context.api()).request<AuditPage>('GET', '/audit', { query: { ...opts } })
      if (context.json()) return printJson(io, page)
      io.stdout.write(formatTable(page.entries, [
        { header: 'AT', value: (e) => e.at },
        { header: 'ACTION', value: (e) => e.action },
        { header: 'ACTOR', value: (e) => e.actor },
        { header: 'ADDRESS', value: (e) => e.address },
        { header: 'TARGETS', value: (e) => e.targets.join(',') },
        { header: 'DETAILS', value: (e) => Object.keys(e.details).length === 0 ? '' : JSON.stringify(e.details) }
      ]))
      if (page.nextBefore !== null) {
        const filters = (['action', 'actor', 'limit'] as const).flatMap((name) => opts[name] === undefined ? [] : [`--${name}`, shellWord(String(opts[name]))])
        io.stderr.write(`older entries: reaktor audit ${[...filters, '--before', shellWord(page.nextBefore)].join(' ')}\n`)
      }
    })
}
