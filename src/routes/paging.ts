import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { FastifySchemaValidationError } from 'fastify/types/schema.js'
import type { PageLimit } from '../schemas/common.js'

/** What `limit` must be, for messages. */
export function limitRule ({ min, max, default: byDefault }: PageLimit): string {
  return `limit must be an integer from ${min} to ${max} (default ${byDefault})`
}

/**
 * The preValidation of a paged list, for its integer query parameters (each name with what it must
 * be): the validator coerces the text to a number, which would take "0x10", "1e2" or " 10" for one,
 * and lets hundreds of digits through as Infinity (a 500 once serialized or sent to the database),
 * so each must be digits only, of a safe integer.
 */
export function digitsOnly (rules: Record<string, string>): (this: FastifyInstance, request: FastifyRequest) => Promise<void> {
  return async function (this: FastifyInstance, request: FastifyRequest): Promise<void> {
    const query = request.query as Record<string, unknown>
    for (const [name, rule] of Object.entries(rules)) {
      const value = query[name]
      if (typeof value === 'string' && (!/^[0-9]+$/.test(value) || !Number.isSafeInteger(Number(value)))) throw this.httpErrors.badRequest(rule)
    }
  }
}

/**
 * The schemaErrorFormatter of a paged list: a query error says what is allowed rather than which
 * schema keyword failed (a repeated parameter reads as an array, which "must be integer" would not
 * explain), also for the list's filters given in `filterRules`; other errors read as Fastify's own.
 */
export function pagingErrors (rule: string, beforeRule: (error: FastifySchemaValidationError) => string, filterRules: Record<string, string> = {}): (errors: FastifySchemaValidationError[], dataVar: string) => Error {
  return (errors, dataVar) => {
    const first = errors[0]
    if (dataVar === 'querystring' && first?.instancePath === '/limit') return new Error(rule)
    if (dataVar === 'querystring' && first?.instancePath === '/before') return new Error(beforeRule(first))
    // Other query parameters with a rule of their own (`/name` → what is allowed).
    if (dataVar === 'querystring' && first !== undefined && Object.hasOwn(filterRules, first.instancePath)) return new Error(filterRules[first.instancePath])
    return new Error(errors.map((e) => `${dataVar}${e.instancePath} ${e.message ?? 'is invalid'}`).join(', '))
  }
}
