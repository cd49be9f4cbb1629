import { sql, type Kysely } from 'kysely'
import type { Database, User } from '../db/schema.js'
import { dummyPasswordHash, verifyPassword } from './password.js'

type Db = Kysely<Database>

export async function findUserByUsername (db: Db, username: string): Promise<User | undefined> {
  return await db.selectFrom('users').selectAll().where('username', '=', username).executeTakeFirst()
}

/**
 * Creates the user unless one with that name exists; an existing user (and its password) is left
 * untouched. Returns true when this call created it. `on conflict do nothing` makes concurrent
 * starts of several nodes safe: exactly one insert wins.
 */
export async function createUserIfMissing (db: Db, username: string, passwordHash: string): Promise<boolean> {
  const row = await db.insertInto('users')
    // New users default to operator; the one made from ADMIN_USERNAME is the admin its name says.
    .values({ username, password_hash: passwordHash, role: 'admin' })
    .onConflict((oc) => oc.column('username').doNothing())
    .returning('id')
    .executeTakeFirst()
  return row !== undefined
}

/**
 * Creates the user only when the table has no user at all (first run). Returns true when this
 * call created it. Two nodes starting at once can both see an empty table; the unique username
 * then lets only one insert through, so exactly one node reports (and writes) the password.
 */
export async function createFirstUser (db: Db, username: string, passwordHash: string): Promise<boolean> {
  const result = await sql<{ id: string }>`
    insert into users (username, password_hash, role)
    select ${username}, ${passwordHash}, 'admin'
    where not exists (select 1 from users)
    on conflict (username) do nothing
    returning id`.execute(db)
  return result.rows.length > 0
}

export async function hasUser (db: Db, username: string): Promise<boolean> {
  return (await db.selectFrom('users').select('id').where('username', '=', username).executeTakeFirst()) !== undefined
}

/**
 * The user whose password this is, or null. An unknown user costs one scrypt like a known one,
 * so the answer time does not reveal which usernames exist.
 */
export async function verifyCredentials (db: Db, username: string, password: string): Promise<Pick<User, 'id' | 'username'> | null> {
  const user = await findUserByUsername(db, username)
  if (user === undefined) {
    await verifyPassword(password, await dummyPasswordHash())
    return null
  }
  return await verifyPassword(password, user.password_hash) ? { id: user.id, username: user.username } : null
}
