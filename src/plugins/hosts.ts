import fp from 'fastify-plugin'
import { Errors } from '../errors.js'

/** What helmet sent before, now only where it means something. */
const HSTS = 'max-age=31536000; includeSubDomains'

/** Splits a Host header value into its lower-cased host and port ('' when none). */
function splitHost (host: string): { name: string, port: string } {
  const lower = host.toLowerCase()
  const close = lower.startsWith('[') ? lower.indexOf(']') + 1 : 0
  const colon = lower.indexOf(':', close)
  return colon < 0 ? { name: lower, port: '' } : { name: lower.slice(0, colon), port: lower.slice(colon + 1) }
}

/** Whether a Host header value is in the ALLOWED_HOSTS list, split once at start (an entry without a port allows every port). */
function hostAllowed (host: string, allowed: ReadonlyArray<{ name: string, port: string }>): boolean {
  const { name, port } = splitHost(host)
  return allowed.some((e) => e.name === name && (e.port === '' || e.port === port))
}

/**
 * Every request, before routing:
 * - With ALLOWED_HOSTS, a Host that is not listed is answered 421. A page on an attacker's domain
 *   that resolves to this service (DNS rebinding) is same-origin with its own name, so the browser
 *   lets it read the answers; it still sends its own name as Host, and that is refused here.
 * - HSTS only when the request came over https (TLS, or a trusted proxy saying so): on plain http
 *   browsers ignore it, and it would tell them nothing true.
 */
export default fp(async (fastify) => {
  const allowed = fastify.config.allowedHosts?.map(splitHost)
  // Without ALLOWED_HOSTS, and with neither TLS nor a trusted proxy that could say https, there is
  // nothing to do on any request: no hook then (each one costs every request its call).
  const tls = fastify.initialConfig.https !== undefined && fastify.initialConfig.https !== false
  if (allowed === undefined && fastify.config.trustProxy === false && !tls) return
  // A callback hook: no promise per request.
  fastify.addHook('onRequest', (request, reply, done) => {
    if (request.protocol === 'https') void reply.header('strict-transport-security', HSTS)
    // request.host is the Host header, or X-Forwarded-Host from a trusted proxy (TRUST_PROXY).
    if (allowed !== undefined && !hostAllowed(request.host, allowed)) {
      done(new Errors.HostNotAllowed(JSON.stringify(request.host.slice(0, 100))))
      return
    }
    done()
  })
}, { name: 'hosts', dependencies: ['config', 'error-handler'] })
