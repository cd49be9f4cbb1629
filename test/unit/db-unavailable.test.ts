/**
 * Which errors the API answers with 503 "database unavailable" (src/db/unavailable.ts): the
 * database down, unreachable, frozen, out of connections or past the pool's bounds; never a bug,
 * a bad statement or a constraint, which stay 500 (or their own answer).
 */
import t from 'tap'
import { isDatabaseUnavailable } from '../../src/db/unavailable.js'

const withCode = (code: string, message = 'x'): Error => Object.assign(new Error(message), { code })

t.test('unavailability: connection failures, timeouts, shutdowns, too many connections', async (t) => {
  for (const err of [
    new Error('Query read timeout'),
    new Error('timeout exceeded when trying to connect'),
    new Error('Connection terminated due to connection timeout'),
    new Error('Connection terminated unexpectedly'),
    new Error('Client was closed and is not queryable'),
    new Error('Client has encountered a connection error and is not queryable'),
    withCode('ECONNREFUSED'), withCode('ECONNRESET'), withCode('ETIMEDOUT'), withCode('EHOSTUNREACH'),
    withCode('08006'), withCode('08001'), withCode('57P01'), withCode('57P03'), withCode('57014'), withCode('53300')
  ]) t.ok(isDatabaseUnavailable(err), `${(err as { code?: string }).code ?? ''} ${err.message}`)
})

t.test('not unavailability: statement errors, constraints, bugs, non-errors', async (t) => {
  for (const err of [
    withCode('23505', 'duplicate key'), withCode('42P01', 'relation does not exist'), withCode('42601', 'syntax error'),
    withCode('53200', 'out of shared memory'), new TypeError('x is undefined'), new Error('aktor "a" failed'),
    null, undefined, 'Query read timeout', 42
  ]) t.notOk(isDatabaseUnavailable(err), String((err as Error | null)?.message ?? err))
})
