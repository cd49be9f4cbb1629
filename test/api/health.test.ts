import t from 'tap'
import { build } from '../helpers/app.js'

t.test('healthz answers while the process is up', async (t) => {
  const app = await build(t)
  const res = await app.inject({ method: 'GET', url: '/healthz' })
  t.equal(res.statusCode, 200)
  t.same(res.json(), { status: 'ok' })
})

t.test('readyz is ready once migrations ran, 503 when the database is gone', async (t) => {
  const app = await build(t)
  const ok = await app.inject({ method: 'GET', url: '/readyz' })
  t.equal(ok.statusCode, 200)
  await app.db.destroy()
  const down = await app.inject({ method: 'GET', url: '/readyz' })
  t.equal(down.statusCode, 503)
  t.same(Object.keys(down.json()).sort(), ['error', 'message', 'statusCode'])
})

t.test('unknown API routes answer a JSON 404', async (t) => {
  const app = await build(t)
  const res = await app.inject({ method: 'GET', url: '/api/v1/does-not-exist' })
  t.equal(res.statusCode, 404)
  t.match(res.json(), { statusCode: 404, error: 'Not Found' })
})

t.test('readyz is 503 while a known migration is missing from the database', async (t) => {
  const app = await build(t)
  await app.db.deleteFrom('kysely_migration' as any).where('name', '=', '20261124000000_polling').execute()
  const res = await app.inject({ method: 'GET', url: '/readyz' })
  t.equal(res.statusCode, 503)
  t.match(res.json(), { statusCode: 503, message: 'database migrations are not applied' })
})
