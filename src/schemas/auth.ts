import { Type } from 'typebox'
import { PASSWORD_MAX } from '../lib/user-rules.js'
import { StoredText } from './common.js'

/** Bounded so that a request cannot make the server hash megabytes; no password can be longer than the rules allow. */
const Username = StoredText({ maxLength: 200 })
const Password = Type.String({ maxLength: PASSWORD_MAX })

/** `POST /api/v1/auth/login` */
export const LoginBody = Type.Object({ username: Username, password: Password })

export const LoginResult = Type.Object({
  token: Type.String({ description: 'Session token: send it as X-Service-Token' }),
  expiresAt: Type.String({ format: 'date-time' })
}, { description: 'Logged in: a new session token' })

/** `POST /api/v1/auth/logout` */
export const LogoutResult = Type.Object({ message: Type.String() }, { description: 'The token is revoked' })

/** `GET /api/v1/auth/me`: who the presented credential belongs to (a console or a CLI shows it, and the role decides what they offer). */
export const WhoAmI = Type.Object({
  username: Type.String(),
  role: Type.Union([Type.Literal('admin'), Type.Literal('operator')]),
  kind: Type.Union([Type.Literal('session'), Type.Literal('token')], { description: 'session: a login (API or browser); token: an API token' }),
  tokenId: Type.Optional(Type.String({ description: 'The API token presented (kind token): what DELETE /api/v1/tokens/{id} names' })),
  expiresAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'When the credential ends; null: an API token without expiry' })
}, { description: 'The user and role of the presented credential' })

/** `POST /login` (application/x-www-form-urlencoded, from the login page). */
export const LoginFormBody = Type.Object({
  username: Username,
  password: Password,
  redirect: Type.Optional(Type.String())
})

/** `GET /login?redirect=…` */
export const LoginPageQuery = Type.Object({
  // A repeated parameter is not an error for a person following a link: it falls back to `/`.
  redirect: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())]))
})

/** The login page, for the response schemas of the HTML routes. */
export const HtmlPage = { content: { 'text/html': { schema: Type.String() } } }
