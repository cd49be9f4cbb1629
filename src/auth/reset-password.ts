import { sql, type Kysely } from 'kysely'
import { insertAudit } from '../audit/record.js'
import type { Database } from '../db/schema.js'
import { revokeUserCredentials } from './sessions.js'
import { findUserByUsername } from './users.js'

export interface PasswordReset {
  /** The username as stored (the lookup ignores case). */
  username: string
  /** The user was disabled, and is enabled again. */
  enabled: boolean
}

/**
 * Sets a user's password from outside the service (the lost admin password): enables the user,
 * ends every session and API token of the user, and writes the audit row, all in one transaction,
 * so a failure changes nothing. Running nodes drop their cached credentials of the user when the
 * transaction commits (revokeUserCredentials). Returns null, changing nothing, for an unknown user.
 */
export async function resetPassword (db: Kysely<Database>, username: string, passwordHash: string, { node, via }: { node: string, via: string }): Promise<PasswordReset | null> {
  return await db.transaction().execute(async (trx) => {
    const user = await findUserByUsername(trx, username, { forUpdate: true })
    if (user === undefined) return null
    await trx.updateTable('users')
      .set({ password_hash: passwordHash, disabled_at: null, updated_at: sql<Date>`now()` })
      .where('id', '=', user.id)
      .execute()
    await revokeUserCredentials(trx, user.id)
    const enabled = user.disabled_at !== null
    await insertAudit(trx, {
      action: 'user.password_reset',
      actor: null,
      address: null,
      node,
      targets: [user.username],
      details: { via, ...(enabled ? { enabled: true } : {}) }
    })
    return { username: user.username, enabled }
  })
}
