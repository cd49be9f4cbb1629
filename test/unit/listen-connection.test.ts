/**
 * The listening connection of the session and status caches (src/db/listen-connection.ts): its
 * round trips, which callers use to know every notification committed before their call has been
 * handled, go one at a time on its client.
 */
import t from 'tap'
import type pg from 'pg'
import { createTestDatabase } from '../helpers/database.js'
import { memoryLogger } from '../helpers/log.js'
import { ListenConnection } from '../../src/db/listen-connection.js'

t.test('round trips asked for at once are sent one after the other, each after its call, and all answered', async (t) => {
  const url = await createTestDatabase(t)
  const log = memoryLogger()
  const connection = new ListenConnection({
    url, applicationName: 'listen-connection-test', channel: 'listen_connection_test', name: 'test listener', whileLost: 'nothing', log, onNotification: () => {}, onReset: () => {}
  })
  await connection.start()
  t.teardown(async () => await connection.stop())
  const client = connection.client
  if (client === undefined) throw new Error('not connected')

  // Counts the statements out on the client at once (pg would queue a second one, and warns).
  let out = 0
  let most = 0
  const query = client.query.bind(client) as (config: pg.QueryConfig) => Promise<pg.QueryResult>
  client.query = ((config: pg.QueryConfig) => {
    out++
    most = Math.max(most, out)
    return query(config).finally(() => { out-- })
  }) as typeof client.query

  t.same(await Promise.all([connection.ping(), connection.ping(), connection.ping()]), [true, true, true], 'every caller is answered')
  t.equal(most, 1, 'never two statements out at once')
  t.same(log.lines, [], 'and nothing was lost')
})
