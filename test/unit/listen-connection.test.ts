/**
 * The listening connection of the session and status caches (src/db/listen-connection.ts): its
 * round trips, which callers use to know every notification committed before their call has been
 * handled, go one at a time on its client, and callers that come while one is out share the next.
 */
import t from 'tap'
import type pg from 'pg'
import { waitFor } from '../helpers/timing.js'
import { createTestDatabase } from '../helpers/database.js'
import { memoryLogger } from '../helpers/log.js'
import { ListenConnection } from '../../src/db/listen-connection.js'

t.test('round trips go one at a time, each sent after its call; those asked for while one is out share the next', async (t) => {
  const url = await createTestDatabase(t)
  const log = memoryLogger()
  const connection = new ListenConnection({
    url, applicationName: 'listen-connection-test', channel: 'listen_connection_test', name: 'test listener', whileLost: 'nothing', log, onNotification: () => {}, onReset: () => {}
  })
  await connection.start()
  t.teardown(async () => await connection.stop())
  const client = connection.client
  if (client === undefined) throw new Error('not connected')

  // Counts the statements sent, and those out on the client at once (pg would queue a second
  // one, and warns).
  let sent = 0
  let out = 0
  let most = 0
  // The first statement is held (a slow server) until the later callers have come.
  let answerFirst = (): void => {}
  const firstHeld = new Promise<void>((resolve) => { answerFirst = resolve })
  const query = client.query.bind(client) as (config: pg.QueryConfig) => Promise<pg.QueryResult>
  client.query = ((config: pg.QueryConfig) => {
    sent++
    out++
    most = Math.max(most, out)
    return (sent === 1 ? firstHeld : Promise.resolve()).then(async () => await query(config)).finally(() => { out-- })
  }) as typeof client.query

  const first = connection.ping()
  await waitFor(() => sent === 1, { what: 'the first round trip to be sent' })
  // Asked for while it is out: one more round trip, sent after it, for both callers.
  const later = [connection.ping(), connection.ping()]
  answerFirst()
  t.same(await Promise.all([first, ...later]), [true, true, true], 'every caller is answered')
  t.equal(most, 1, 'never two statements out at once')
  t.equal(sent, 2, 'the callers that came while one was out shared the next')
  t.same(log.lines, [], 'and nothing was lost')
})
