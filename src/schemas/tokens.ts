import { Type } from 'typebox'
import { API_TOKEN_PATTERN } from '../auth/api-tokens.js'
import { UNPRINTABLE_CLASS } from '../lib/user-rules.js'
import { described, StoredText } from './common.js'
import { MAX_ID_PARAM_LENGTH } from './polling.js'

/** The shortest and longest lifetime a token may be given (without expiresIn it never expires). */
export const TOKEN_EXPIRY = { min: '1m', max: '3650d' } as const

/**
 * Printable as usernames are: no control characters (they would garble the listing and the logs),
 * and no format ones either (a right-to-left override or a zero-width space makes a name in the
 * listing read as another), no lone surrogate.
 */
export const TOKEN_NAME_PATTERN = `^[^${UNPRINTABLE_CLASS}]+$`
export const DURATION_PATTERN = '^[0-9]+(ms|s|m|h|d)$'

/** `POST /api/v1/tokens` */
export const CreateTokenBody = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 100, pattern: TOKEN_NAME_PATTERN, description: 'What the token is for, e.g. the script using it: 1 to 100 printable characters' }),
  expiresIn: Type.Optional(Type.String({
    maxLength: 20,
    pattern: DURATION_PATTERN,
    description: `Lifetime: an integer and a unit (ms, s, m, h, d), from ${TOKEN_EXPIRY.min} to ${TOKEN_EXPIRY.max}; left out, the token never expires`
  }))
}, { additionalProperties: false })

const Timestamp = Type.String({ format: 'date-time' })
const Expiry = Type.Union([Timestamp, Type.Null()], { description: 'When it stops working; null: never' })

export const CreatedToken = Type.Object({
  id: Type.String({ format: 'uuid' }),
  name: Type.String(),
  token: Type.String({ pattern: API_TOKEN_PATTERN.source, description: 'The API token, shown this once: send it as X-Service-Token' }),
  createdAt: Timestamp,
  expiresAt: Expiry
}, { description: 'The new token: keep it now, it is never shown again' })

export const TokenView = Type.Object({
  id: Type.String({ format: 'uuid' }),
  name: Type.String(),
  owner: Type.String({ description: 'Username of the user the token acts as' }),
  createdAt: Timestamp,
  lastUsedAt: Type.Union([Timestamp, Type.Null()], { description: 'When a request last used it, to the minute; null: never used' }),
  expiresAt: Expiry
})

export const TokenList = described(Type.Object({ tokens: Type.Array(TokenView) }), 'Your tokens (an admin: everyone\'s), oldest first; never their secrets')

export const TokenIdParams = Type.Object({
  // Anything up to the router's limit: what is no token id answers 404 like an unknown one.
  id: StoredText({ minLength: 1, maxLength: MAX_ID_PARAM_LENGTH, description: 'The token id' })
})

export const RevokedToken = Type.Object({ message: Type.String() }, { description: 'Revoked: the token no longer works on any node (within a second)' })
