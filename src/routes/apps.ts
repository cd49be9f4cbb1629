import fs from 'node:fs/promises'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { sql } from 'kysely'
import type { Static } from 'typebox'
import { loadApp } from '../apps/loader.js'
import { activateVersion, APPS_CHANNEL, deleteApp, deleteVersion, listApps, showApp, storePackage, type AppDetails as AppDetailsRow, type AppSummary } from '../apps/package-store.js'
import { RegistrationError } from '../apps/registry.js'
import { Errors } from '../errors.js'
import { Answers, described, ErrorBody } from '../schemas/common.js'
import { Activated, ActivateBody, AppDetails, AppList, AppSummary as AppSummarySchema, AppNameParams, AppVersionParams, Deleted, Published, PublishQuery } from '../schemas/apps.js'

const iso = (d: Date | null): string | null => d === null ? null : d.toISOString()

function summaryView (a: AppSummary): Static<typeof AppSummarySchema> {
  return { ...a, changedAt: iso(a.changedAt), latestPublishedAt: iso(a.latestPublishedAt) }
}

function detailsView (a: AppDetailsRow): Static<typeof AppDetails> {
  return {
    ...a,
    changedAt: iso(a.changedAt),
    versions: a.versions.map((v) => ({ ...v, publishedAt: v.publishedAt.toISOString() })),
    nodes: a.nodes.map((n) => ({ ...n, since: iso(n.since), updatedAt: n.updatedAt.toISOString() }))
  }
}

const { unavailable: Unavailable, internal: Internal, unauthenticated: Unauthenticated, tooLarge: TooLarge, notJson: NotJson } = Answers
const NotAdmin = described(ErrorBody, 'Only admins publish, activate and delete apps')
const NoSuchApp = described(ErrorBody, 'No app of that name is published (or no such version of it)')
const BadInput = described(ErrorBody, 'Invalid request: the message says which rule the input broke')

/** What a package is sent as: `npm pack` writes gzip; curl --data-binary sends octet-stream unless told. */
const PACKAGE_TYPES = ['application/gzip', 'application/x-gzip', 'application/octet-stream']

/**
 * `/api/v1/apps`: publishing reaktor apps (docs/apps.md "Publishing apps"). A package is checked
 * as a start would check it (the archive, then its loading on this node, then the set of apps it
 * joins) before anything is stored; a publish or an activation is committed with a NOTIFY that
 * switches every node, and answered once this node has switched.
 */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  const { db, config, appCatalog, packageFolders, publishedApps } = fastify
  const limits = config.packageLimits
  fastify.addContentTypeParser(PACKAGE_TYPES, { parseAs: 'buffer', bodyLimit: limits.maxBytes }, (_request, body, done) => { done(null, body) })
  const admin = { preHandler: fastify.requireAdmin }
  const actor = (auth: { username: string } | null): string | null => auth?.username ?? null
  /** After a change that switches nodes: this node has switched (or recorded why it could not). */
  const switched = async (name: string): Promise<void> => {
    publishedApps.enqueue([name])
    await publishedApps.settled()
  }
  /** What this node runs of the app, and why not the active version. */
  const thisNode = (name: string): { nodeId: string, version: string | null, error: string | null } => {
    const state = publishedApps.states.get(name)
    return { nodeId: config.nodeId, version: state?.version ?? null, error: state?.failed?.message ?? null }
  }

  fastify.post('/apps', {
    // Before the body is read: only an admin may make the node take in a package.
    onRequest: fastify.requireAdmin,
    bodyLimit: limits.maxBytes,
    schema: {
      operationId: 'publishApp',
      tags: ['apps'],
      summary: 'Publish a version of an app (its npm tarball as the body) and, unless activate=false, switch every node to it',
      description: `The body is the output of \`npm pack\` (\`Content-Type: application/gzip\` or \`application/octet-stream\`; \`curl --data-binary @my-app-1.2.0.tgz\`), at most ${limits.maxBytes} bytes. ` +
        'It is loaded on this node as a start would load it before anything is stored. Versions are immutable: the same bytes again change nothing (200), other bytes under a stored version are refused (409).',
      querystring: PublishQuery,
      response: {
        200: described(Published, 'This version was already stored with these bytes'),
        201: described(Published, 'Stored (and activated unless activate=false)'),
        400: described(ErrorBody, 'Not a package, or a hostile one: the message names the entry and the rule'),
        401: Unauthenticated,
        403: NotAdmin,
        409: described(ErrorBody, 'The version is stored with other bytes, or the name is an app loaded from a folder'),
        413: described(ErrorBody, 'The package is larger than APP_PACKAGE_MAX_BYTES'),
        415: described(ErrorBody, 'The body is not application/gzip or application/octet-stream'),
        422: described(ErrorBody, 'The package would not load: the message is the one a start would give (file:line and caret for a syntax error)'),
        500: Internal,
        503: Unavailable
      }
    }
  }, async (request, reply) => {
    // Checked while it unpacks: a PackageError carries its status (400; 413 over APP_PACKAGE_MAX_BYTES).
    const { pkg, dir, created } = await packageFolders.unpack(request.body as Buffer)
    const { name, version } = pkg
    const activate = request.query.activate !== 'false'
    let result
    try {
      const fixed = appCatalog.app(name)
      if (fixed !== undefined && !publishedApps.states.has(name)) {
        throw new Errors.AppLoadedFromFolder(name, fixed.dir === undefined ? 'the apps given in code' : 'REAKTOR_APPS_DIR')
      }
      try {
        appCatalog.check(await loadApp(dir, config.appSettingsEnv, request.log))
      } catch (err) {
        throw err instanceof RegistrationError ? new Errors.AppWouldNotLoad(err.message) : err
      }
      result = await db.transaction().execute(async (trx) => {
        const stored = await storePackage(trx, { ...pkg, bytes: request.body as Buffer }, actor(request.auth), activate)
        if (stored.stored || stored.activated) {
          await fastify.audit(request, { action: 'app.publish', targets: [`${name}@${version}`], details: { sha256: pkg.sha256, size: pkg.size, stored: stored.stored, activated: stored.activated, previous: stored.previous } }, trx)
        }
        return stored
      })
    } catch (err) {
      // Refused: the folder this request unpacked is of no stored version. (Node keeps a module it imported.)
      if (created) await fs.rm(dir, { recursive: true, force: true })
      throw err
    }
    if (result.activated) await switched(name)
    return await reply.code(result.stored ? 201 : 200).send({ name, version, sha256: pkg.sha256, size: pkg.size, ...result, thisNode: thisNode(name) })
  })

  fastify.get('/apps', {
    schema: {
      operationId: 'listApps',
      tags: ['apps'],
      summary: 'Published apps: their active version and how many versions are stored',
      response: { 200: described(AppList, 'Every published app, by name'), 401: Unauthenticated, 500: Internal, 503: Unavailable }
    }
  }, async () => ({ apps: (await listApps(db)).map(summaryView) }))

  fastify.get('/apps/:name', {
    schema: {
      operationId: 'getApp',
      tags: ['apps'],
      summary: 'A published app: its versions (newest first), the active one, and what each node runs of it',
      params: AppNameParams,
      response: { 200: described(AppDetails, 'The app, its versions and what each node runs of it'), 400: BadInput, 401: Unauthenticated, 404: NoSuchApp, 500: Internal, 503: Unavailable }
    }
  }, async (request) => detailsView(await showApp(db, request.params.name)))

  fastify.post('/apps/:name/activate', {
    ...admin,
    schema: {
      operationId: 'activateAppVersion',
      tags: ['apps'],
      summary: 'Switch every node to a published version of the app (a rollback is activating an earlier one)',
      params: AppNameParams,
      body: ActivateBody,
      response: { 200: described(Activated, 'Activated: this node has switched (thisNode says so, or why not); the others follow'), 400: BadInput, 401: Unauthenticated, 403: NotAdmin, 404: NoSuchApp, 413: TooLarge, 415: NotJson, 500: Internal, 503: Unavailable }
    }
  }, async (request) => {
    const { name } = request.params
    const { version } = request.body
    const result = await db.transaction().execute(async (trx) => {
      const activated = await activateVersion(trx, name, version, actor(request.auth))
      if (activated.changed) await fastify.audit(request, { action: 'app.activate', targets: [`${name}@${version}`], details: { previous: activated.previous } }, trx)
      return activated
    })
    if (result.changed) await switched(name)
    return { name, version, ...result, thisNode: thisNode(name) }
  })

  fastify.delete('/apps/:name/versions/:version', {
    ...admin,
    schema: {
      operationId: 'deleteAppVersion',
      tags: ['apps'],
      summary: 'Delete a version that is not active (its UI path stops being served)',
      params: AppVersionParams,
      response: { 200: described(Deleted, 'Deleted'), 400: BadInput, 401: Unauthenticated, 403: NotAdmin, 404: NoSuchApp, 409: described(ErrorBody, 'It is the active version'), 500: Internal, 503: Unavailable }
    }
  }, async (request) => {
    const { name, version } = request.params
    await db.transaction().execute(async (trx) => {
      await deleteVersion(trx, name, version)
      // Every node stops serving its UI (src/plugins/app-ui.ts opens a published site on demand).
      await sql`select pg_notify(${APPS_CHANNEL}, ${name})`.execute(trx)
      await fastify.audit(request, { action: 'app.delete_version', targets: [`${name}@${version}`], details: {} }, trx)
    })
    // Not the folder of a version this node still runs (it could not load the active one).
    if (publishedApps.states.get(name)?.version !== version) await packageFolders.remove(name, version)
    return { message: `App ${name}@${version} deleted` }
  })

  fastify.delete('/apps/:name', {
    ...admin,
    schema: {
      operationId: 'deleteApp',
      tags: ['apps'],
      summary: 'Delete an app: every node stops and unlists its reaktors (their history stays), and every version is deleted',
      params: AppNameParams,
      response: { 200: described(Deleted, 'Deleted on every node'), 400: BadInput, 401: Unauthenticated, 403: NotAdmin, 404: NoSuchApp, 500: Internal, 503: Unavailable }
    }
  }, async (request) => {
    const { name } = request.params
    const deleted = await db.transaction().execute(async (trx) => {
      const gone = await deleteApp(trx, name)
      await fastify.audit(request, { action: 'app.delete', targets: [name], details: { activeVersion: gone.activeVersion, versions: gone.versions } }, trx)
      return gone
    })
    await switched(name)
    return { message: `App ${name} deleted (${deleted.versions} ${deleted.versions === 1 ? 'version' : 'versions'})` }
  })
}

export default routes
