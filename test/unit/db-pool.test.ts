/**
 * The service's pool under a terminated backend. pg-pool watches only idle clients; a client lent
 * out (a transaction between two statements) is the borrower's to watch, and a FATAL message
 * arriving then is emitted as an 'error' event: without a listener, it crashes the process.
 */
import t from 'tap'
import pg from 'pg'
import { sql } from 'kysely'
import { createDatabase } from '../../src/db/index.js'
import { createTestDatabase } from '../helpers/database.js'

t.test('a backend terminated between two statements of a transaction fails that transaction, not the process', async (t) => {
  const url = await createTestDatabase(t)
  const { db, pool } = createDatabase(url, { max: 2 })
  t.teardown(async () => await db.destroy())
  const killer = new pg.Client({ connectionString: url })
  await killer.connect()
  t.teardown(async () => await killer.end())

  let lent: pg.PoolClient | undefined
  pool.on('acquire', (client) => { lent = client })
  const failed = await db.transaction().execute(async (trx) => {
    const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx)
    const client = lent!
    const ended = new Promise<void>((resolve) => client.once('end', () => resolve()))
    await killer.query('select pg_terminate_backend($1)', [rows[0].pid])
    // pg emits 'error' (the FATAL message) before 'end': past this line, the process survived it.
    await ended
    await sql`select 1`.execute(trx)
  }).then(() => undefined, (err: Error) => err)
  t.ok(failed instanceof Error, `the transaction failed: ${failed?.message}`)

  const { rows } = await sql<{ one: number }>`select 1 as one`.execute(db)
  t.same(rows, [{ one: 1 }], 'the pool serves the next statement on a fresh connection')
})
