import { Type } from 'typebox'
import { PASSWORD_MAX, PASSWORD_MIN } from '../lib/user-rules.js'
import { StoredText } from './common.js'

/**
 * Bounded before trimming, so a request cannot make the server scan megabytes; the username rules
 * proper (1–64 printable characters after trimming) are checked in src/lib/user-rules.ts.
 */
export const UsernameInput = StoredText({ minLength: 1, maxLength: 200, description: 'Trimmed; 1–64 printable characters; compared without regard to case' })

export const NewPassword = Type.String({ minLength: PASSWORD_MIN, maxLength: PASSWORD_MAX, description: `${PASSWORD_MIN} to ${PASSWORD_MAX} characters` })

export const RoleSchema = Type.Enum(['admin', 'operator'], { description: '`admin`: everything, including users; `operator`: everything except managing users' })

export const UserSchema = Type.Object({
  id: Type.String(),
  username: Type.String(),
  role: RoleSchema,
  disabled: Type.Boolean({ description: 'A disabled user cannot log in, and none of its sessions or tokens work' }),
  createdAt: Type.String({ format: 'date-time' }),
  updatedAt: Type.String({ format: 'date-time' })
})

export const UserParams = Type.Object({ username: UsernameInput })

/** `POST /api/v1/users` */
export const CreateUserBody = Type.Object({
  username: UsernameInput,
  role: RoleSchema,
  password: Type.Optional(NewPassword)
}, { additionalProperties: false })

/** `PATCH /api/v1/users/{username}`: at least one of the two. */
export const UpdateUserBody = Type.Object({
  role: Type.Optional(RoleSchema),
  disabled: Type.Optional(Type.Boolean())
}, { minProperties: 1, additionalProperties: false })

/** `POST /api/v1/users/{username}/password` */
export const ResetPasswordBody = Type.Object({ password: Type.Optional(NewPassword) }, { additionalProperties: false })

/** `POST /api/v1/auth/password` */
export const OwnPasswordBody = Type.Object({
  currentPassword: Type.String({ maxLength: PASSWORD_MAX }),
  newPassword: NewPassword
}, { additionalProperties: false })

export const UserList = Type.Object({ users: Type.Array(UserSchema) }, { description: 'Every user, by username' })

export const UserWithPassword = Type.Object({
  user: UserSchema,
  password: Type.Optional(Type.String({ description: 'The generated password, shown this once; absent when the request chose it' }))
})

export const OwnPasswordResult = Type.Object({ message: Type.String() }, { description: 'Changed: every session and API token of the user has ended, this one included; log in again' })
