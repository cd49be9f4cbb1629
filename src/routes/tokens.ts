import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { tokenDigest } from '../auth/sessions.js'
import type { ApiTokenView } from '../auth/api-tokens.js'
import { TOKEN_HEADER, type AuthSession } from '../auth/types.js'
import { isDuration, parseDuration } from '../lib/duration.js'
import { Errors } from '../errors.js'
import { strictJsonBodies } from './json-body.js'
import { ruleMessage } from './users.js'
import { Answers, described, ErrorBody } from '../schemas/common.js'
import { CreatedToken, CreateTokenBody, RevokedToken, TOKEN_EXPIRY, TokenIdParams, TokenList } from '../schemas/tokens.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const MIN_EXPIRY_MS = parseDuration(TOKEN_EXPIRY.min)
const MAX_EXPIRY_MS = parseDuration(TOKEN_EXPIRY.max)

const { unavailable: Unavailable, internal: Internal, unauthenticated: Unauthenticated } = Answers

function view (token: ApiTokenView): { id: string, name: string, owner: string, createdAt: string, lastUsedAt: string | null, expiresAt: string | null } {
  return { ...token, createdAt: token.createdAt.toISOString(), lastUsedAt: token.lastUsedAt?.toISOString() ?? null, expiresAt: token.expiresAt?.toISOString() ?? null }
}

/** `/api/v1/tokens`: API tokens for scripts (inside the authenticated scope: request.auth is set). */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  const { db, apiTokens } = fastify
  strictJsonBodies(fastify)
  const principal = (auth: AuthSession | null): AuthSession => {
    // The scope's authenticate hook ran first: there is always one.
    if (auth === null) throw new Errors.Unauthorized()
    return auth
  }

  fastify.post('/tokens', {
    schemaErrorFormatter: ruleMessage,
    schema: {
      operationId: 'createApiToken',
      tags: ['tokens'],
      summary: 'Create an API token for a script, acting as you with your role',
      description: 'Needs a login session: an API token cannot create tokens (a leaked one must not be able to mint others that outlive its revocation). ' +
        'The token is in the answer only: the service keeps its SHA-256. Without expiresIn it never expires.',
      body: CreateTokenBody,
      response: {
        201: CreatedToken,
        400: described(ErrorBody, 'Invalid name or expiresIn: the message says which rule the input broke'),
        401: Unauthenticated,
        403: described(ErrorBody, 'Presented with an API token: create tokens with a login session'),
        413: Answers.tooLarge,
        415: Answers.notJson,
        500: Internal,
        503: Unavailable
      }
    }
  }, async (request, reply) => {
    const auth = principal(request.auth)
    if (auth.kind !== 'session') throw new Errors.Forbidden('API tokens are created with a login session (POST /api/v1/auth/login), not with an API token')
    const { name, expiresIn } = request.body
    // The schema admits only the duration form; one too large for a number is out of range like any other.
    const expiresInMs = expiresIn === undefined ? null : isDuration(expiresIn) ? parseDuration(expiresIn) : Infinity
    if (expiresInMs !== null && (expiresInMs < MIN_EXPIRY_MS || expiresInMs > MAX_EXPIRY_MS)) throw new Errors.ApiTokenExpiry(TOKEN_EXPIRY.min, TOKEN_EXPIRY.max)
    const token = apiTokens.issue()
    const created = await db.transaction().execute(async (trx) => {
      // authenticate() accepted the header as this login session's token.
      const sessionDigest = tokenDigest(request.headers[TOKEN_HEADER] as string)
      const row = await apiTokens.insert(trx, { userId: auth.userId, owner: auth.username, sessionDigest, name, digest: tokenDigest(token), expiresInMs })
      // The session ended (or its user was disabled or deleted) since it was checked.
      if (row === null) throw new Errors.Unauthorized()
      await fastify.audit(request, { action: 'token.create', targets: [row.id], details: { name, owner: row.owner, expiresAt: row.expiresAt?.toISOString() ?? null } }, trx)
      return row
    })
    const { id, createdAt, expiresAt } = view(created)
    void reply.code(201).header('cache-control', 'no-store')
    return { id, name: created.name, token, createdAt, expiresAt }
  })

  fastify.get('/tokens', {
    schema: {
      operationId: 'listApiTokens',
      tags: ['tokens'],
      summary: 'List API tokens: your own, or everyone\'s for an admin',
      response: { 200: TokenList, 401: Unauthenticated, 500: Internal, 503: Unavailable }
    }
  }, async (request) => {
    const auth = principal(request.auth)
    const tokens = await apiTokens.list(auth.role === 'admin' ? null : auth.userId)
    return { tokens: tokens.map(view) }
  })

  fastify.delete('/tokens/:id', {
    schema: {
      operationId: 'revokeApiToken',
      tags: ['tokens'],
      summary: 'Revoke an API token: yours, or anyone\'s for an admin',
      description: 'Deletes the token; every node refuses it within a second. An API token may revoke tokens (itself included).',
      params: TokenIdParams,
      response: {
        200: RevokedToken,
        400: described(ErrorBody, 'Invalid id: the message says which rule it broke'),
        401: Unauthenticated,
        404: described(ErrorBody, 'No such token of yours (an admin: of anyone)'),
        500: Internal,
        503: Unavailable
      }
    }
  }, async (request) => {
    const auth = principal(request.auth)
    if (!UUID.test(request.params.id)) throw new Errors.ApiTokenNotFound()
    // The id as created and listed: an id sent in capitals finds the same token and must be recorded as it.
    const id = request.params.id.toLowerCase()
    const removed = await db.transaction().execute(async (trx) => {
      const row = await apiTokens.remove(trx, id, auth.role === 'admin' ? null : auth.userId)
      if (row === undefined) throw new Errors.ApiTokenNotFound()
      await fastify.audit(request, { action: 'token.revoke', targets: [id], details: { name: row.name, owner: row.owner } }, trx)
      return row
    })
    apiTokens.forget(removed.digest)
    return { message: `API token ${id} revoked` }
  })
}
export default routes
