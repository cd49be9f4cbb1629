/**
 * The OpenAPI document as a whole: public, valid against the OpenAPI 3.1 schema, every API route
 * in it, every operation named and summarized, every answer described and with its schema, and the shapes of the polling operations (the run as a
 * component, run now's 202 and 409, the bulk answer) as the routes answer them.
 */
import t from 'tap'
import type { RouteOptions } from 'fastify'
import { Validator } from '@seriousme/openapi-schema-validator'
import { ADMIN_ENV, loggedIn } from '../helpers/auth.js'
import { build } from '../helpers/app.js'
import { probe } from '../helpers/scheduler.js'

const COMPONENT = '#/components/schemas/'

/** `GET /api/v1/polling/:reaktorId/status` as the document writes it: `/api/v1/polling/{reaktorId}/status`. */
function documentedName (method: string, url: string): string {
  return `${method} ${url.replace(/:([A-Za-z0-9_]+)/g, '{$1}')}`
}

t.test('the document is public, valid OpenAPI 3.1, lists every API route and documents every answer of every operation', async (t) => {
  const routes: RouteOptions[] = []
  const app = await build(t, {
    env: ADMIN_ENV,
    apps: [{ name: 'doc-app', version: '1.0.0', pollingReaktors: [probe('doc', () => false, { interval: '1h' }).registration] }],
    onRoute: (route) => { routes.push(route) }
  })
  const res = await app.inject({ method: 'GET', url: '/api/v1/openapi.json' })
  t.equal(res.statusCode, 200, 'served without a token')
  t.match(res.headers['content-type'], /^application\/json/)
  const doc = res.json()
  const call = await loggedIn(app)
  t.same((await call('GET', '/api/v1/openapi.json')).body, doc, 'the same document with a token')

  const validator = new Validator()
  const result = await validator.validate(doc)
  t.same(result.errors ?? [], [], 'no schema violation')
  t.equal(result.valid, true, 'valid against the OpenAPI 3.1 schema')

  const components = doc.components.schemas as Record<string, any>
  const operations = Object.entries(doc.paths as Record<string, Record<string, any>>)
    .flatMap(([path, methods]) => Object.entries(methods).map(([method, op]) => ({ name: `${method.toUpperCase()} ${path}`, op })))
  t.ok(operations.length >= 11, `${operations.length} operations`)

  // Every route under /api/v1 is an operation of the document, whoever adds it: only the document
  // itself is left out. HEAD routes are Fastify's automatic twins of the GET routes.
  const apiRoutes = routes.filter((r) => r.url.startsWith('/api/v1/'))
  const registered = apiRoutes.flatMap((r) => [r.method].flat().filter((m) => m !== 'HEAD').map((m) => documentedName(m, r.url)))
  t.ok(registered.includes('GET /api/v1/openapi.json'), 'the document\'s own route was seen')
  t.same(registered.filter((name) => name !== 'GET /api/v1/openapi.json').sort(), operations.map(({ name }) => name).sort(),
    'every API route is documented, and nothing else is')

  const ids = operations.map(({ op }) => op.operationId)
  t.same(ids.filter((id, i) => ids.indexOf(id) !== i), [], 'operationIds are unique')
  t.same(doc.security, [{ serviceToken: [] }], 'the token is required document-wide')
  t.match(doc.components.securitySchemes.serviceToken, { type: 'apiKey', in: 'header', name: 'X-Service-Token', description: /session token.*API token/ },
    'the scheme says an API token serves as well as a session token')
  for (const { name, op } of operations) {
    t.match(op.operationId, /^[a-z][a-zA-Z0-9]*$/, `${name}: a camelCase operationId`)
    t.ok(Array.isArray(op.tags) && op.tags.length > 0 && typeof op.summary === 'string' && op.summary.length > 0, `${name}: tags and summary`)
    for (const [code, response] of Object.entries(op.responses as Record<string, any>)) {
      t.ok(typeof response.description === 'string' && response.description !== 'Default Response' && response.description.length > 0,
        `${name} ${code}: described (${JSON.stringify(response.description)})`)
      const schema = response.content?.['application/json']?.schema
      t.ok(schema !== undefined, `${name} ${code}: has a JSON schema`)
      if (Number(code) >= 400) t.same(schema, { $ref: `${COMPONENT}ErrorBody` }, `${name} ${code}: the error body`)
    }
    // The token is checked against the sessions in the database (a cache answers most checks, not all).
    const needed = op.security === undefined ? ['401', '500', '503'] : ['500', '503']
    t.same(needed.filter((code) => op.responses[code] === undefined), [], `${name}: documents ${needed.join(', ')}`)
  }
  t.same(Object.keys(components.ErrorBody.properties).sort(), ['error', 'message', 'statusCode'], 'the one error body')
  t.same([...components.ErrorBody.required].sort(), ['error', 'message', 'statusCode'])

  // What the routes declare, the document must answer for: input is validated (400), and a route
  // for admins only refuses the others (403).
  for (const route of apiRoutes.filter((r) => r.schema?.hide !== true && r.method !== 'HEAD')) {
    const name = documentedName(String(route.method), route.url)
    const op = operations.find((o) => o.name === name)?.op
    if (op === undefined) continue // reported above
    if (route.schema?.body !== undefined || route.schema?.params !== undefined || route.schema?.querystring !== undefined) {
      t.ok(op.responses['400'] !== undefined, `${name}: validates its input, documents 400`)
    }
    // A body is parsed before anything else: one too large, or not JSON, is refused by every such route.
    if (route.schema?.body !== undefined) {
      t.same(['413', '415'].filter((code) => op.responses[code] === undefined), [], `${name}: takes a JSON body, documents 413 and 415`)
    }
    if ([route.preHandler].flat().includes(app.requireAdmin)) t.ok(op.responses['403'] !== undefined, `${name}: admins only, documents 403`)
  }

  const open = operations.filter(({ op }) => op.security !== undefined)
  t.same(open.map(({ name, op }) => [name, op.security]), [['POST /api/v1/auth/login', []]], 'except by the login, which needs none')
  const login = await app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { username: 'x', password: 'y' } })
  t.equal(login.statusCode, 401, 'as the service answers: a login without a token is heard (and refused for its password)')
  t.equal(login.json().message, 'Invalid username or password')

  // The status is one component, used by the status and by the list.
  t.same(doc.paths['/api/v1/polling/{reaktorId}/status'].get.responses['200'].content['application/json'].schema, { $ref: `${COMPONENT}PollingStatus` })
  t.same(doc.paths['/api/v1/polling'].get.responses['200'].content['application/json'].schema.properties.pollingReaktors.items, { $ref: `${COMPONENT}PollingStatus` })
  t.ok(components.PollingStatus.properties.lastOutcome !== undefined, 'the status component has its fields')

  // The list: one operation, its page parameters and the page's fields documented, optional.
  const list = doc.paths['/api/v1/polling'].get
  const listParameters = Object.fromEntries((list.parameters as any[]).map((p) => [p.name, p]))
  t.same(Object.keys(listParameters).sort(), ['app', 'failing', 'limit', 'offset', 'order', 'q', 'sort', 'state'])
  t.same((list.parameters as any[]).filter((p) => p.in !== 'query' || p.required === true).map((p) => p.name), [], 'every one optional, in the query')
  t.same(listParameters.sort.schema.enum, ['id', 'label', 'app', 'state', 'interval', 'lastRun', 'nextRun', 'lastSuccessAt', 'consecutiveFailures', 'owner', 'lastOutcome'])
  t.same(listParameters.state.schema.enum, ['running', 'stopped'])
  t.same(listParameters.failing.schema.enum, ['true', 'false'])
  t.same(listParameters.order.schema.enum, ['asc', 'desc'])
  t.match(listParameters.limit.schema, { type: 'integer', minimum: 1, maximum: 1000 })
  t.match(listParameters.offset.schema, { type: 'integer', minimum: 0 })
  t.match(listParameters.q.schema, { minLength: 1, maxLength: 200 })
  for (const p of list.parameters as any[]) t.ok(typeof (p.description ?? p.schema.description) === 'string', `list parameter ${String(p.name)}: described`)
  const listAnswer = list.responses['200'].content['application/json'].schema
  t.same(listAnswer.required, ['pollingReaktors'], 'the page fields are optional: absent without query parameters')
  t.same(Object.keys(listAnswer.properties).sort(), ['counts', 'limit', 'offset', 'pollingReaktors', 'total'])
  for (const name of ['counts', 'limit', 'offset', 'total']) t.match(listAnswer.properties[name].description, /query parameters/, `${name}: says when it is there`)
  t.same(Object.keys(listAnswer.properties.counts.properties).sort(), ['all', 'failing', 'running', 'stopped'])
  t.match(list.description, /Without query parameters/)
  const status = await call('GET', '/api/v1/polling/doc/status')
  t.same(Object.keys(status.body).sort(), Object.keys(components.PollingStatus.properties).sort(), 'the status as answered has the component\'s fields')

  // The polling operations this document is read for.
  const run = doc.paths['/api/v1/polling/{reaktorId}/run'].post.responses
  t.same(Object.keys(run).sort(), ['202', '400', '401', '404', '409', '500', '503'])
  t.same(run['202'].content['application/json'].schema, { $ref: `${COMPONENT}Message` })
  t.same(Object.keys(components.Message.properties), ['message'])
  t.match(run['409'].description, /stopped/, 'the 409 says when it comes')

  const runs = doc.paths['/api/v1/polling/{reaktorId}/runs'].get.responses['200'].content['application/json'].schema
  t.same(runs.properties.runs.items, { $ref: '#/components/schemas/PollingRun' }, 'a run is the reusable component')
  const runSchema = doc.components.schemas.PollingRun
  t.same(Object.keys(runSchema.properties).sort(), ['durationMs', 'error', 'node', 'outcome', 'reaktorDefinitionId', 'runId', 'startedAt'])
  t.same([...runSchema.required].sort(), Object.keys(runSchema.properties).sort(), 'every field always present')

  const idRules = (schema: any): unknown => ({ minLength: schema.minLength, maxLength: schema.maxLength, pattern: schema.pattern })
  const pathId = doc.paths['/api/v1/polling/{reaktorId}/run'].post.parameters.find((p: any) => p.name === 'reaktorId').schema
  t.same(idRules(pathId), { minLength: 1, maxLength: 1024, pattern: '^[^\\u0000\\uD800-\\uDFFF]*$' }, 'a path id: the router\'s limit documented')
  for (const path of ['/api/v1/polling/{reaktorId}/runs', '/api/v1/polling/{reaktorId}/status']) {
    t.same(idRules(doc.paths[path].get.parameters.find((p: any) => p.name === 'reaktorId').schema), idRules(pathId), `${path}: the same id rules`)
  }

  for (const action of ['start', 'stop']) {
    const op = doc.paths[`/api/v1/polling/${action}`].post
    const answer = op.responses['200'].content['application/json'].schema
    t.same(Object.keys(answer.properties).sort(), ['action', 'changed', 'notFound', 'results', 'unchanged'], `bulk ${action}: the answer's shape`)
    t.same(Object.keys(answer.properties.results.items.properties).sort(), ['reaktorDefinitionId', 'result'])
    t.same(answer.properties.results.items.properties.result.anyOf.map((s: any) => s.const ?? s.enum?.[0]).sort(),
      ['already_running', 'already_stopped', 'not_found', 'started', 'stopped'])
    t.same(Object.keys(op.responses).sort(), ['200', '400', '401', '404', '413', '415', '500', '503'])
    t.same(idRules(op.requestBody.content['application/json'].schema.anyOf[0].properties.ids.items), idRules(pathId), `bulk ${action}: an id as in the path`)
    t.ok(op.requestBody.required, 'a body is required')
  }
})
