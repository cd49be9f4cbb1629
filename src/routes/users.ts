import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { FastifyRequest, FastifySchemaValidationError } from 'fastify'
import { hashPassword, randomPassword } from '../auth/password.js'
import { changeOwnPassword, createUser, deleteUser, getUser, listUsers, resetPassword, updateUser, type AuditRecorder, type ChangeContext } from '../auth/user-admin.js'
import { tokenDigest } from '../auth/sessions.js'
import { TOKEN_HEADER } from '../auth/types.js'
import { PRINTABLE_RULE, usernameProblem } from '../lib/user-rules.js'
import { Errors } from '../errors.js'
import { strictJsonBodies } from './json-body.js'
import { Answers, described, ErrorBody, STORED_TEXT_PATTERN } from '../schemas/common.js'
import { DURATION_PATTERN, TOKEN_NAME_PATTERN } from '../schemas/tokens.js'
import { CreateUserBody, OwnPasswordBody, OwnPasswordResult, ResetPasswordBody, UpdateUserBody, UserList, UserParams, UserSchema, UserWithPassword } from '../schemas/users.js'

const invalid = described(ErrorBody, 'A username or password rule is broken: the message names the field and the rule')
const unauthorized = described(ErrorBody, 'Missing, invalid or expired session or API token')
const forbidden = described(ErrorBody, 'The caller is not an admin')
const unknownUser = described(ErrorBody, 'No user of this name (compared without regard to case)')
const lastAdmin = described(ErrorBody, 'The change would leave no enabled admin')
const unavailable = described(ErrorBody, 'The database is unavailable; retry shortly')
const { notJson, tooLarge } = Answers

/** What each pattern of the account schemas means, for a person. */
const PATTERN_RULES: Record<string, string> = {
  [STORED_TEXT_PATTERN]: 'no NUL or unpaired surrogate characters',
  [TOKEN_NAME_PATTERN]: PRINTABLE_RULE,
  [DURATION_PATTERN]: 'an integer and a unit (ms, s, m, h or d), e.g. 90d'
}

/**
 * Schema errors of these routes in the wording of the rules (`password: at least 12 characters`),
 * like the ones src/lib/user-rules.ts gives for what a schema cannot say.
 */
export function ruleMessage (errors: FastifySchemaValidationError[], dataVar: string): Error {
  const e = errors[0]
  const field = e.instancePath.replace(/^\//, '').replaceAll('/', '.')
  const params = e.params as Record<string, unknown>
  const rule = ((): string | undefined => {
    switch (e.keyword) {
      case 'minLength': return `${field}: at least ${String(params.limit)} character${params.limit === 1 ? '' : 's'}`
      case 'maxLength': return `${field}: at most ${Number(params.limit).toLocaleString('en-US')} characters`
      case 'required': return `${String(params.missingProperty)}: required`
      case 'enum': return `${field}: one of ${(params.allowedValues as string[]).join(', ')}`
      case 'minProperties': return 'at least one field to change'
      case 'pattern': return PATTERN_RULES[String(params.pattern)] === undefined ? undefined : `${field}: ${PATTERN_RULES[String(params.pattern)]}`
      case 'additionalProperties': return `${field === '' ? '' : `${field}.`}${String(params.additionalProperty)}: not a field of this request`
      case 'type': return `${field === '' ? dataVar : field}: must be ${String(params.type)}`
      default: return undefined
    }
  })()
  return new Error(rule ?? `${dataVar}${e.instancePath} ${e.message ?? 'is invalid'}`)
}

/**
 * `/api/v1/users`: user administration, admins only (docs/accounts.md "Users and roles"), and
 * `POST /api/v1/auth/password`, every user's own password. Registered in the authenticated scope.
 */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  strictJsonBodies(fastify)
  const recorder = (request: FastifyRequest): AuditRecorder => async (trx, action, targets, details) =>
    await fastify.audit(request, { action, targets, details }, trx)
  // authenticate() ran first: request.auth is set on every route here.
  const change = (request: FastifyRequest): ChangeContext => ({
    db: fastify.db,
    audit: recorder(request),
    actorId: request.auth?.userId ?? '',
    // authenticate() accepted the header: a single string, the token of this session or API token.
    credential: { kind: request.auth?.kind ?? 'session', digest: tokenDigest(request.headers[TOKEN_HEADER] as string) }
  })
  const admin = { preHandler: fastify.requireAdmin, schemaErrorFormatter: ruleMessage }
  const tags = ['users']

  fastify.get('/users', {
    ...admin,
    schema: {
      operationId: 'listUsers',
      tags,
      summary: 'List the users',
      response: { 200: UserList, 401: unauthorized, 403: forbidden, 500: ErrorBody, 503: unavailable }
    }
  }, async () => ({ users: await listUsers(fastify.db) }))

  fastify.post('/users', {
    ...admin,
    schema: {
      operationId: 'createUser',
      tags,
      summary: 'Create a user; without a password, one is generated and returned once',
      body: CreateUserBody,
      response: {
        201: described(UserWithPassword, 'Created; `password` is the generated one, shown this once'),
        400: invalid,
        401: unauthorized,
        403: forbidden,
        409: described(ErrorBody, 'The username is taken (compared without regard to case)'),
        413: tooLarge,
        415: notJson,
        500: ErrorBody,
        503: unavailable
      }
    }
  }, async (request, reply) => {
    const { username, role } = request.body
    // The rule a schema cannot say (the name after trimming), with the same 400 body.
    const problem = usernameProblem(username)
    if (problem !== null) throw new Errors.InvalidUserInput(problem)
    const generated = request.body.password === undefined
    const password = request.body.password ?? randomPassword()
    const user = await createUser(change(request), { username, role, passwordHash: await hashPassword(password), generated })
    void reply.code(201).header('cache-control', 'no-store')
    return generated ? { user, password } : { user }
  })

  fastify.get('/users/:username', {
    ...admin,
    schema: {
      operationId: 'getUser',
      tags,
      summary: 'One user',
      params: UserParams,
      response: { 200: described(UserSchema, 'The user'), 400: invalid, 401: unauthorized, 403: forbidden, 404: unknownUser, 500: ErrorBody, 503: unavailable }
    }
  }, async (request) => await getUser(fastify.db, request.params.username))

  fastify.patch('/users/:username', {
    ...admin,
    schema: {
      operationId: 'updateUser',
      tags,
      summary: 'Change the role of a user, or disable or enable it (both in one change)',
      params: UserParams,
      body: UpdateUserBody,
      response: { 200: described(UserSchema, 'The user after the change'), 400: invalid, 401: unauthorized, 403: forbidden, 404: unknownUser, 409: lastAdmin, 413: tooLarge, 415: notJson, 500: ErrorBody, 503: unavailable }
    }
  }, async (request) => {
    const user = await updateUser(change(request), request.params.username, request.body)
    fastify.sessions.forgetUser(user.id)
    return user
  })

  fastify.post('/users/:username/password', {
    ...admin,
    schema: {
      operationId: 'resetUserPassword',
      tags,
      summary: 'Set a new password for a user (generated and returned once when omitted); ends its sessions and tokens',
      params: UserParams,
      body: ResetPasswordBody,
      response: {
        200: described(UserWithPassword, 'Reset; every session and API token of the user has ended. `password` is the generated one, shown this once'),
        400: invalid,
        401: unauthorized,
        403: forbidden,
        404: unknownUser,
        413: tooLarge,
        415: notJson,
        500: ErrorBody,
        503: unavailable
      }
    }
  }, async (request, reply) => {
    const generated = request.body.password === undefined
    const password = request.body.password ?? randomPassword()
    const user = await resetPassword(change(request), request.params.username, await hashPassword(password), generated)
    fastify.sessions.forgetUser(user.id)
    void reply.header('cache-control', 'no-store')
    return generated ? { user, password } : { user }
  })

  fastify.delete('/users/:username', {
    ...admin,
    schema: {
      operationId: 'deleteUser',
      tags,
      summary: 'Delete a user with its sessions and API tokens',
      params: UserParams,
      response: { 200: described(Type.Object({ message: Type.String() }), 'Deleted, with its sessions and API tokens'), 400: invalid, 401: unauthorized, 403: forbidden, 404: unknownUser, 409: lastAdmin, 500: ErrorBody, 503: unavailable }
    }
  }, async (request) => {
    const { id, username } = await deleteUser(change(request), request.params.username)
    fastify.sessions.forgetUser(id)
    return { message: `User "${username}" deleted` }
  })

  fastify.post('/auth/password', {
    preHandler: fastify.limitPasswordAttempts,
    schemaErrorFormatter: ruleMessage,
    schema: {
      operationId: 'changeOwnPassword',
      tags: ['auth'],
      summary: 'Change your own password; every session and API token of yours ends, this one included',
      body: OwnPasswordBody,
      response: {
        200: OwnPasswordResult,
        400: invalid,
        401: unauthorized,
        403: described(ErrorBody, 'The current password is wrong (counted like a failed login)'),
        429: described(ErrorBody, 'Too many wrong passwords or failed logins: retry after `Retry-After` seconds'),
        413: tooLarge,
        415: notJson,
        500: ErrorBody,
        503: unavailable
      }
    }
  }, async (request) => {
    const { currentPassword, newPassword } = request.body
    const checked = await fastify.checkOwnPassword(request, currentPassword)
    // A password changed elsewhere since the check is no longer the current one: the same answer.
    const userId = request.auth?.userId ?? ''
    const changed = checked !== null && await changeOwnPassword(fastify.db, recorder(request), userId, checked, await hashPassword(newPassword))
    if (!changed) throw new Errors.WrongPassword()
    fastify.sessions.forgetUser(userId)
    return { message: 'Password changed; every session and API token of yours has ended: log in again' }
  })
}
export default routes
