/**
 * A flood of well-formed, made-up session tokens (a new one per request), from its own process so
 * that it never shares an event loop with the server under test:
 * `node --import tsx test/helpers/token-flood.ts <url> <seconds> <connections>` prints one line of
 * JSON with the requests answered and how many were 401.
 */
import { randomBytes } from 'node:crypto'
import autocannon from 'autocannon'

const [url, seconds, connections] = process.argv.slice(2)
if (!new URL(url).hostname.startsWith('127.')) throw new Error('the flood only targets 127.0.0.1')
const result = await autocannon({
  url,
  connections: Number(connections),
  duration: Number(seconds),
  requests: [{ setupRequest: (request) => ({ ...request, headers: { ...request.headers, 'x-service-token': randomBytes(32).toString('base64url') } }) }]
})
process.stdout.write(JSON.stringify({ total: result.requests.total, perSecond: result.requests.average, status4xx: result['4xx'], status2xx: result['2xx'], errors: result.errors }) + '\n')
