import { sql, type Kysely, type RawBuilder, type SqlBool } from 'kysely'
import type { Database, User } from '../db/schema.js'
import { usernameKey } from '../lib/user-rules.js'
import { dummyPasswordHash, verifyPassword } from './password.js'

type Db = Kysely<Database>

/**
 * The condition on `users` that finds the user of a name as people type it: trimmed, any case,
 * by its key (usernameKey; one lookup on the unique index). Every lookup by name uses it, so the
 * login, the user routes and the reset command find the same user.
 */
function usernameIs (username: string): RawBuilder<SqlBool> {
  return sql<SqlBool>`username_key = ${usernameKey(username)}`
}

/**
 * The user of a name as people type it (usernameIs). `forUpdate`: its row stays locked for the rest
 * of the caller's transaction.
 */
export async function findUserByUsername (db: Db, username: string, { forUpdate = false } = {}): Promise<User | undefined> {
  const query = db.selectFrom('users').selectAll().where(usernameIs(username))
  return await (forUpdate ? query.forUpdate() : query).executeTakeFirst()
}

/**
 * Creates the admin unless a user of that name (in any case) exists; an existing user (its password
 * and role) is left untouched. Returns true when this call created it. `on conflict do nothing`
 * makes concurrent starts of several nodes safe: exactly one insert wins. No conflict target: the
 * unique index on username_key must count too.
 */
export async function createUserIfMissing (db: Db, username: string, passwordHash: string): Promise<boolean> {
  const row = await db.insertInto('users')
    // New users default to operator; the one made from ADMIN_USERNAME is the admin its name says.
    .values({ username, username_key: usernameKey(username), password_hash: passwordHash, role: 'admin' })
    .onConflict((oc) => oc.doNothing())
    .returning('id')
    .executeTakeFirst()
  return row !== undefined
}

/**
 * Creates the admin only when the table has no user at all (first run). Returns true when this
 * call created it. Two nodes starting at once can both see an empty table; the unique username
 * then lets only one insert through, so exactly one node reports (and writes) the password.
 */
export async function createFirstUser (db: Db, username: string, passwordHash: string): Promise<boolean> {
  const result = await sql<{ id: string }>`
    insert into users (username, username_key, password_hash, role)
    select ${username}, ${usernameKey(username)}, ${passwordHash}, 'admin'
    where not exists (select 1 from users)
    on conflict do nothing
    returning id`.execute(db)
  return result.rows.length > 0
}

export async function hasUser (db: Db, username: string): Promise<boolean> {
  return (await findUserByUsername(db, username)) !== undefined
}

/** Who a password was checked for, and the hash it matched (a session is started only while it is still the stored one). */
export interface VerifiedUser { id: string, username: string, passwordHash: string }

/**
 * The user whose password this is, or null. An unknown or disabled user costs one scrypt like a
 * known one, so the answer time does not reveal which usernames exist or are disabled, and a
 * disabled user gets the same answer as a wrong password.
 */
export async function verifyCredentials (db: Db, username: string, password: string): Promise<VerifiedUser | null> {
  const user = await findUserByUsername(db, username)
  const matches = await verifyPassword(password, user?.password_hash ?? await dummyPasswordHash())
  if (user === undefined || user.disabled_at !== null || !matches) return null
  return { id: user.id, username: user.username, passwordHash: user.password_hash }
}
