import pg from 'pg'
import { endOnReadTimeout } from './index.js'

/**
 * The one dead-connection rule of every dedicated (never pooled) connection: the scheduler's lock
 * connection and the LISTEN connections of the session and status caches.
 *
 * A connection whose peer has vanished without a FIN or an RST (a network that silently drops
 * packets, a frozen server) looks alive to its socket for as long as TCP keeps retransmitting:
 * minutes for data, hours for keepalive. So the owner pings it every PING_EVERY_MS, and a
 * statement (ping or not) unanswered for DEAD_AFTER_MS means the connection is dead: it is ended
 * at once (pg destroys the socket of a client with a statement in flight), its 'end' event tells
 * the owner, and the owner reconnects. Until then the owner trusts nothing the connection would
 * have told it.
 */
export const PING_EVERY_MS = 1000
export const DEAD_AFTER_MS = 5000

/** A dedicated client: TCP keepalive on (the kernel's own, slow, safety net), connecting bounded by the rule. */
export function dedicatedClient (url: string, applicationName: string): pg.Client {
  return new pg.Client({ connectionString: url, application_name: applicationName, keepAlive: true, connectionTimeoutMillis: DEAD_AFTER_MS })
}

/**
 * One statement under the rule: unanswered within `deadAfterMs`, the client is ended and the
 * statement rejects. (A failed socket ends the client by itself; an error answered by the server
 * is an answer, and the caller decides what it means.)
 */
export async function roundTrip<R extends pg.QueryResultRow = any> (client: pg.Client, text: string, values: unknown[] = [], deadAfterMs = DEAD_AFTER_MS): Promise<pg.QueryResult<R>> {
  try {
    return await client.query<R>({ text, values, query_timeout: deadAfterMs } as pg.QueryConfig)
  } catch (err) {
    endOnReadTimeout(client, err)
    throw err
  }
}
