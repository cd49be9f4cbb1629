/**
 * Whether an error means the database cannot answer right now (down, unreachable, frozen, out of
 * connections, or too slow for the pool's bounds), as opposed to a bug or a bad statement. The API
 * answers these with 503, so that clients and load balancers retry instead of reporting a fault.
 */
export function isDatabaseUnavailable (err: unknown): boolean {
  if (err === null || typeof err !== 'object') return false
  const { code, message } = err as { code?: unknown, message?: unknown }
  if (typeof code === 'string') {
    // SQLSTATE class 08 connection_exception; 57P01-57P03 admin/crash shutdown, cannot connect now;
    // 57014 query_canceled (statement_timeout); 53300 too_many_connections.
    if (/^08[0-9A-Z]{3}$/.test(code) || ['57P01', '57P02', '57P03', '57014', '53300'].includes(code)) return true
    if (['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN'].includes(code)) return true
  }
  // pg and pg-pool signal their own timeouts and lost connections by message only.
  return typeof message === 'string' && (
    message === 'Query read timeout' ||
    message === 'timeout exceeded when trying to connect' ||
    message.startsWith('Connection terminated') ||
    message.startsWith('Client has encountered a connection error') ||
    message === 'Client was closed and is not queryable')
}
