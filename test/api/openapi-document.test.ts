/**
 * The OpenAPI document as a whole: valid against the OpenAPI 3.1 schema, every answer of every
 * operation described and with its schema, and the shapes of the polling operations (the run as a
 * component, run now's 202 and 409, the bulk answer) as the routes answer them.
 */
import t from 'tap'
import { Validator } from '@seriousme/openapi-schema-validator'
import { ADMIN_ENV, loggedIn } from '../helpers/auth.js'
import { build } from '../helpers/app.js'
import { probe } from '../helpers/scheduler.js'

t.test('the document is valid OpenAPI 3.1 and documents every answer of every operation', async (t) => {
  const app = await build(t, { env: ADMIN_ENV, apps: [{ name: 'doc-app', version: '1.0.0', pollingReaktors: [probe('doc', () => false, { interval: '1h' }).registration] }] })
  const call = await loggedIn(app)
  const doc = (await call('GET', '/api/v1/openapi.json')).body

  const validator = new Validator()
  const result = await validator.validate(doc)
  t.same(result.errors ?? [], [], 'no schema violation')
  t.equal(result.valid, true, 'valid against the OpenAPI 3.1 schema')

  const operations = Object.entries(doc.paths as Record<string, Record<string, any>>)
    .flatMap(([path, methods]) => Object.entries(methods).map(([method, op]) => ({ name: `${method.toUpperCase()} ${path}`, op })))
  t.ok(operations.length >= 11, `${operations.length} operations`)
  for (const { name, op } of operations) {
    t.ok(Array.isArray(op.tags) && op.tags.length > 0 && typeof op.summary === 'string' && op.summary.length > 0, `${name}: tags and summary`)
    for (const [code, response] of Object.entries(op.responses as Record<string, any>)) {
      t.ok(typeof response.description === 'string' && response.description !== 'Default Response' && response.description.length > 0,
        `${name} ${code}: described (${JSON.stringify(response.description)})`)
      const schema = response.content?.['application/json']?.schema
      t.ok(schema !== undefined, `${name} ${code}: has a JSON schema`)
      if (Number(code) >= 400) t.same(Object.keys(schema.properties ?? {}).sort(), ['error', 'message', 'statusCode'], `${name} ${code}: the error body`)
    }
  }

  t.same(doc.security, [{ serviceToken: [] }], 'the token is required document-wide')
  const open = operations.filter(({ op }) => op.security !== undefined)
  t.same(open.map(({ name, op }) => [name, op.security]), [['POST /api/v1/auth/login', []]], 'except by the login, which needs none')
  const login = await app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { username: 'x', password: 'y' } })
  t.equal(login.statusCode, 401, 'as the service answers: a login without a token is heard (and refused for its password)')
  t.equal(login.json().message, 'Invalid username or password')

  // Every polling operation reads or writes the database, so each may answer 503 when it is away.
  for (const { name, op } of operations.filter(({ name }) => name.includes(' /api/v1/polling'))) {
    t.ok(op.responses['503'] !== undefined, `${name}: documents 503`)
  }

  // The polling operations this document is read for.
  const run = doc.paths['/api/v1/polling/{reaktorId}/run'].post.responses
  t.same(Object.keys(run).sort(), ['202', '400', '401', '404', '409', '500', '503'])
  t.same(Object.keys(run['202'].content['application/json'].schema.properties), ['message'])
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
