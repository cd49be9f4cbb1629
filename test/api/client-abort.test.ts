/**
 * A client that goes away in the middle of its request body is the client's doing. Node reports
 * it as `Error: aborted` with code ECONNRESET (the code of a lost database connection too), and
 * Fastify's body parser marks it a 400: the error handler must answer it as such, and never log
 * it as "database unavailable", which is what operators watch for database outages.
 */
import Fastify from 'fastify'
import pino from 'pino'
import t from 'tap'
import errorHandler from '../../src/plugins/error-handler.js'
import { logOutput } from '../helpers/log.js'

t.test('a body cut short by the client (ECONNRESET, 400) is a 400, not a database outage', async (t) => {
  const { stream, lines } = logOutput()
  const app = Fastify({ loggerInstance: pino({ level: 'info' }, stream) })
  t.teardown(async () => await app.close())
  await app.register(errorHandler)
  // What Fastify's body parser passes on when the request stream ends with Node's abort error.
  app.post('/upload', async () => { throw Object.assign(new Error('aborted'), { code: 'ECONNRESET', statusCode: 400 }) })
  // A lost database connection has the same code and no status: still a 503.
  app.get('/read', async () => { throw Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', errno: -104, syscall: 'read' }) })

  const upload = await app.inject({ method: 'POST', url: '/upload', payload: {} })
  t.equal(upload.statusCode, 400)
  t.same(upload.json(), { statusCode: 400, error: 'Bad Request', message: 'aborted' })
  t.same(lines.filter((l) => l.includes('database unavailable')), [], 'nothing about the database in the log')

  const read = await app.inject({ method: 'GET', url: '/read' })
  t.equal(read.statusCode, 503)
  t.match(read.json(), { statusCode: 503, error: 'Service Unavailable' })
  t.equal(lines.filter((l) => l.includes('database unavailable')).length, 1)
})
