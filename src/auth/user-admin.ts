import { sql, type Kysely, type Transaction } from 'kysely'
import type { AuditAction } from '../audit/record.js'
import type { Database, Role, User } from '../db/schema.js'
import { normalizeUsername, usernameKey } from '../lib/user-rules.js'
import { findLiveToken } from './api-tokens.js'
import { Forbidden, LastAdmin, Unauthorized, UsernameTaken, UserNotFound } from './errors.js'
import { findLiveSession, revokeUserCredentials } from './sessions.js'
import { findUserByUsername } from './users.js'

type Db = Kysely<Database>
type Trx = Transaction<Database>

/**
 * Every change to users takes this transaction-scoped advisory lock (two-int4 form, namespace
 * "RKTU" in ASCII, beside the scheduler's in src/scheduler/ownership/keys.ts) before reading what it checks:
 * changes serialize across the cluster, so "is another admin left?" cannot be answered twice from
 * the same state (two admins demoting each other at once leave one admin).
 */
export const USER_ADMIN_LOCK_NAMESPACE = 0x524b_5455
export const USER_ADMIN_LOCK_KEY = 0

/** Writes the change's audit row in the change's transaction (the route binds the request). */
export type AuditRecorder = (trx: Trx, action: AuditAction, targets: string[], details?: Record<string, unknown>) => Promise<void>

/** Who makes a change, and where it is recorded. */
export interface ChangeContext {
  db: Db
  audit: AuditRecorder
  /** The acting user's id: it must still be an enabled admin when the change takes the lock. */
  actorId: string
  /** The SHA-256 of the session or API token the request came with: it must still be live then too. */
  credential: { kind: 'session' | 'token', digest: Buffer }
}

/** A user as the API shows it: never the hash. */
export interface UserView {
  id: string
  username: string
  role: Role
  disabled: boolean
  createdAt: string
  updatedAt: string
}

export function userView (user: User): UserView {
  return {
    id: String(user.id),
    username: user.username,
    role: user.role,
    disabled: user.disabled_at !== null,
    createdAt: user.created_at.toISOString(),
    updatedAt: user.updated_at.toISOString()
  }
}

async function locked<T> (db: Db, change: (trx: Trx) => Promise<T>): Promise<T> {
  return await db.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(${USER_ADMIN_LOCK_NAMESPACE}, ${USER_ADMIN_LOCK_KEY})`.execute(trx)
    return await change(trx)
  })
}

/** Whether a session or API token is still live: the very lookups that authenticate requests. */
async function credentialLive (trx: Trx, { kind, digest }: ChangeContext['credential']): Promise<boolean> {
  return (kind === 'session' ? await findLiveSession(trx, digest) : await findLiveToken(trx, digest)) !== null
}

/**
 * An admin's change, under the lock. The caller's role was read when its request was
 * authenticated, maybe before a change that demoted, disabled or deleted it committed: read again
 * here, so such a request changes nothing (403). So is its credential: a logout, a revoked token
 * or a password change (which ends every credential) committed while the request waited leaves it
 * nothing to act with (401).
 */
async function asAdmin<T> ({ db, actorId, credential }: ChangeContext, change: (trx: Trx) => Promise<T>): Promise<T> {
  return await locked(db, async (trx) => {
    const actor = await trx.selectFrom('users').select('id')
      .where('id', '=', actorId).where('role', '=', 'admin').where('disabled_at', 'is', null)
      .executeTakeFirst()
    if (actor === undefined) throw new Forbidden('This needs the admin role')
    if (!await credentialLive(trx, credential)) throw new Unauthorized()
    return await change(trx)
  })
}

/** The user of a name (trimmed, any case), locked for the rest of the transaction; 404 when none. */
async function lockUser (trx: Trx, username: string): Promise<User> {
  const user = await findUserByUsername(trx, username, { forUpdate: true })
  if (user === undefined) throw new UserNotFound(normalizeUsername(username))
  return user
}

/** 409 when `user` is an enabled admin and no other enabled admin exists. Call under the lock. */
async function keepAnAdmin (trx: Trx, user: User): Promise<void> {
  if (user.role !== 'admin' || user.disabled_at !== null) return
  const other = await trx.selectFrom('users').select('id')
    .where('role', '=', 'admin').where('disabled_at', 'is', null).where('id', '<>', user.id)
    .limit(1).executeTakeFirst()
  if (other === undefined) throw new LastAdmin(user.username)
}

export async function listUsers (db: Db): Promise<UserView[]> {
  const rows = await db.selectFrom('users').selectAll().orderBy('username_key').execute()
  return rows.map(userView)
}

export async function getUser (db: Db, username: string): Promise<UserView> {
  const user = await findUserByUsername(db, username)
  if (user === undefined) throw new UserNotFound(normalizeUsername(username))
  return userView(user)
}

export async function createUser (ctx: ChangeContext, input: { username: string, role: Role, passwordHash: string, generated: boolean }): Promise<UserView> {
  const username = normalizeUsername(input.username)
  return await asAdmin(ctx, async (trx) => {
    // No conflict target: the unique index on username_key is the one that decides.
    const user = await trx.insertInto('users')
      .values({ username, username_key: usernameKey(username), role: input.role, password_hash: input.passwordHash })
      .onConflict((oc) => oc.doNothing())
      .returningAll()
      .executeTakeFirst()
    if (user === undefined) throw new UsernameTaken(username)
    await ctx.audit(trx, 'user.create', [username], { role: input.role, generatedPassword: input.generated })
    return userView(user)
  })
}

/** Role and enabled state, in one transaction: either both change or neither. */
export async function updateUser (ctx: ChangeContext, username: string, change: { role?: Role, disabled?: boolean }): Promise<UserView> {
  return await asAdmin(ctx, async (trx) => {
    const user = await lockUser(trx, username)
    const role = change.role ?? user.role
    const disable = change.disabled === true && user.disabled_at === null
    const enable = change.disabled === false && user.disabled_at !== null
    if (role !== 'admin' || disable) await keepAnAdmin(trx, user)
    if (role === user.role && !disable && !enable) return userView(user)
    const updated = await trx.updateTable('users')
      .set({ role, disabled_at: disable ? sql<Date>`now()` : enable ? null : user.disabled_at, updated_at: sql<Date>`now()` })
      .where('id', '=', user.id)
      .returningAll()
      .executeTakeFirstOrThrow()
    if (role !== user.role) await ctx.audit(trx, 'user.role_change', [user.username], { from: user.role, to: role })
    if (disable) await ctx.audit(trx, 'user.disable', [user.username])
    if (enable) await ctx.audit(trx, 'user.enable', [user.username])
    // A disabled user keeps nothing; a new role only has to be read again by every node.
    await revokeUserCredentials(trx, user.id, { keepCredentials: !disable })
    return userView(updated)
  })
}

export async function resetPassword (ctx: ChangeContext, username: string, passwordHash: string, generated: boolean): Promise<UserView> {
  return await asAdmin(ctx, async (trx) => {
    const user = await lockUser(trx, username)
    const updated = await trx.updateTable('users')
      .set({ password_hash: passwordHash, updated_at: sql<Date>`now()` })
      .where('id', '=', user.id)
      .returningAll()
      .executeTakeFirstOrThrow()
    await revokeUserCredentials(trx, user.id)
    await ctx.audit(trx, 'user.password_reset', [user.username], { generatedPassword: generated })
    return userView(updated)
  })
}

/** Returns the id and name the user had. */
export async function deleteUser (ctx: ChangeContext, username: string): Promise<{ id: string, username: string }> {
  return await asAdmin(ctx, async (trx) => {
    const user = await lockUser(trx, username)
    await keepAnAdmin(trx, user)
    // Before the delete: the notification names the user, and the rows it revokes go with it.
    await revokeUserCredentials(trx, user.id)
    await trx.deleteFrom('users').where('id', '=', user.id).execute()
    await ctx.audit(trx, 'user.delete', [user.username], { role: user.role })
    return { id: user.id, username: user.username }
  })
}

/**
 * A user's own new password, applied only while the stored hash is still the one the current
 * password was checked against (a concurrent change wins; the caller answers as for a wrong
 * password). Returns false when it was not applied.
 */
export async function changeOwnPassword (db: Db, audit: AuditRecorder, userId: string, checkedHash: string, newHash: string): Promise<boolean> {
  return await locked(db, async (trx) => {
    const user = await trx.updateTable('users')
      .set({ password_hash: newHash, updated_at: sql<Date>`now()` })
      .where('id', '=', userId).where('password_hash', '=', checkedHash).where('disabled_at', 'is', null)
      .returning('username')
      .executeTakeFirst()
    if (user === undefined) return false
    await revokeUserCredentials(trx, userId)
    await audit(trx, 'auth.password_change', [user.username])
    return true
  })
}
