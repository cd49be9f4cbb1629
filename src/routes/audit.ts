import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { BEFORE_RULE, loadAuditLog } from '../audit/pages.js'
import { AuditEntry, AuditPage, AuditQuery } from '../schemas/audit.js'
import { AUDIT_LIMIT } from '../schemas/page-limits.js'
import { described, ErrorBody } from '../schemas/common.js'
import { digitsOnly, limitRule, pagingErrors } from './paging.js'

const LIMIT_RULE = limitRule(AUDIT_LIMIT)
const FILTER_RULES: Record<string, string> = Object.fromEntries((['action', 'actor'] as const).map((name) => {
  const { minLength, maxLength } = AuditQuery.properties[name] as { minLength?: number, maxLength?: number }
  return [`/${name}`, `${name} must be ${String(minLength)} to ${String(maxLength)} characters, without NUL or unpaired surrogate characters, given once`]
}))

/** `GET /audit`: the audit log, newest first, paged by cursor; admins only. */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  const log = await loadAuditLog(fastify.db)
  fastify.addSchema(AuditEntry)

  fastify.get('/audit', {
    schemaErrorFormatter: pagingErrors(LIMIT_RULE, () => `${BEFORE_RULE}, given once`, FILTER_RULES),
    preValidation: digitsOnly({ limit: LIMIT_RULE }),
    preHandler: fastify.requireAdmin,
    schema: {
      operationId: 'listAuditEntries',
      tags: ['audit'],
      summary: 'The audit log: privileged actions, newest first (admin only)',
      description: 'Every privileged action as recorded by the node that took it: polling start, stop, run now and bulk actions, ' +
        'the restart-time reset, logins (failed ones too), logouts, and changes to users and API tokens. Newest first; page with ' +
        '`before`: pass the `nextBefore` of the previous answer, with the same filters, until it is null. Paging neither repeats nor ' +
        'skips an entry while new ones are written or old ones pruned. Entries older than AUDIT_RETENTION are deleted.',
      querystring: AuditQuery,
      response: {
        200: described(AuditPage, 'A page of audit entries, newest first'),
        400: described(ErrorBody, 'A bad limit, before, action or actor: the message says what is allowed'),
        401: ErrorBody,
        403: described(ErrorBody, 'The caller is not an admin'),
        500: ErrorBody,
        503: ErrorBody
      }
    }
  }, async (request) => {
    const { limit = AUDIT_LIMIT.default, before, action, actor } = request.query
    const page = await log.page({ limit, before, action, actor })
    if ('invalid' in page) throw fastify.httpErrors.badRequest(page.invalid)
    return page
  })
}
export default routes
