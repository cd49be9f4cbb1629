import { Type, type Static, type TInteger, type TOptional, type TSchema, type TString, type TStringOptions } from 'typebox'

/**
 * A request string that may reach a query: no NUL (PostgreSQL text refuses it, which surfaced as a
 * 500) and no lone UTF-16 surrogate (pg would send U+FFFD in its place, so the query would look up
 * something other than what was sent). Ajv compiles patterns with the `u` flag, where the range
 * matches only unpaired surrogates: characters outside the BMP pass.
 */
export const STORED_TEXT_PATTERN = '^[^\\u0000\\uD800-\\uDFFF]*$'

export function StoredText (options: TStringOptions = {}): TString {
  return Type.String({ ...options, pattern: STORED_TEXT_PATTERN })
}

/** The bounds of a paged list's `limit`. */
export interface PageLimit { min: number, max: number, default: number }

/** The optional `limit` of a paged list: how many `what`, within the list's bounds. */
export function PageLimitParam ({ min, max, default: byDefault }: PageLimit, what: string): TOptional<TInteger> {
  return Type.Optional(Type.Integer({ minimum: min, maximum: max, default: byDefault, description: `How many ${what}, ${min} to ${max} (default ${byDefault})` }))
}

/**
 * Every error body of the service: registered once (fastify.addSchema, see SHARED_SCHEMAS) and
 * named ErrorBody among the OpenAPI components. No description of its own: each answer says what
 * it means (a route's `described`, or the openapi plugin's wording of the common codes).
 */
export const ErrorBodySchema = Type.Object({
  statusCode: Type.Integer(),
  error: Type.String({ description: 'The reason phrase of the status code' }),
  message: Type.String({ description: 'What went wrong, for a person (5xx: no internals)' })
}, { $id: 'ErrorBody', title: 'ErrorBody' })

/** What routes put in their response schemas: a reference to the one error body. */
export const ErrorBody = Type.Unsafe<Static<typeof ErrorBodySchema>>(Type.Ref('ErrorBody'))

/** A response schema with what that answer means: its description in the OpenAPI document. */
export function described<T extends TSchema> (schema: T, description: string): T {
  return { ...schema, description }
}

/** The answers many routes share, in one wording each. */
export const Answers = {
  unauthenticated: described(ErrorBody, 'Missing, invalid or expired token (X-Service-Token)'),
  unavailable: described(ErrorBody, 'The database is unavailable: retry shortly'),
  internal: described(ErrorBody, 'Internal error: the body carries no detail (the node logs it)'),
  tooLarge: described(ErrorBody, 'The body is larger than the service accepts'),
  notJson: described(ErrorBody, 'The body is not application/json')
}

/** The 404 of the routes that take a reaktor id, in one wording. */
export const UnknownReaktorAnswer = described(ErrorBody, 'No polling reaktor of this id is registered on this node')
