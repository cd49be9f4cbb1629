import fs from 'node:fs/promises'
import path from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import type { Kysely } from 'kysely'
import type { Config } from '../config.js'
import type { Database } from '../db/schema.js'
import { hashPassword, randomPassword } from './password.js'
import { createFirstUser, createUserIfMissing, hasUser } from './users.js'

export const FIRST_ADMIN_USERNAME = 'admin'
export const INITIAL_PASSWORD_FILE = 'initial-admin-password'

/** Writes the file readable by the service's user only, also when it existed with wider rights. */
async function writePrivateFile (file: string, content: string): Promise<void> {
  await fs.mkdir(path.dirname(file), { recursive: true })
  const handle = await fs.open(file, 'w', 0o600)
  try {
    // The mode of open() applies only to a new file; chmod before writing covers an old one.
    await handle.chmod(0o600)
    await handle.writeFile(content)
  } finally {
    await handle.close()
  }
}

/**
 * docs/configuration.md: with ADMIN_USERNAME/ADMIN_PASSWORD, that user is created when missing (an
 * existing user's password is never changed). Without them, on a first run with no user at all,
 * user `admin` gets a random password, logged once and written to DATA_DIR/initial-admin-password.
 * Safe when several nodes start at once: the inserts decide, not a check before them.
 */
export async function bootstrapAdmin (db: Kysely<Database>, config: Config, log: FastifyBaseLogger): Promise<void> {
  if (config.adminUsername !== undefined && config.adminPassword !== undefined) {
    const username = config.adminUsername
    // Hashing is slow on purpose; skip it on the usual start where the user exists already.
    if (await hasUser(db, username)) return
    if (await createUserIfMissing(db, username, await hashPassword(config.adminPassword))) {
      log.info({ username }, 'created the admin user from ADMIN_USERNAME/ADMIN_PASSWORD')
    }
    return
  }

  const anyUser = await db.selectFrom('users').select('id').limit(1).executeTakeFirst()
  if (anyUser !== undefined) return
  const password = randomPassword()
  if (!(await createFirstUser(db, FIRST_ADMIN_USERNAME, await hashPassword(password)))) return
  const file = path.join(config.dataDir, INITIAL_PASSWORD_FILE)
  try {
    await writePrivateFile(file, password + '\n')
  } catch (err) {
    log.error({ err, file }, 'could not write the initial admin password file; the password is only in this log')
  }
  // The password goes in the message on purpose: `password` fields are redacted, and this one line
  // is how a newcomer logs in the first time.
  log.warn({ username: FIRST_ADMIN_USERNAME, file },
    `first run: created user "${FIRST_ADMIN_USERNAME}" with password ${password} (also saved in ${file}, readable only by this user; it is not shown again)`)
}
