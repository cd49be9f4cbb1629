import { createHash } from 'node:crypto'
import createError from '@fastify/error'
import { sql, type Kysely } from 'kysely'
import type { Database } from '../db/schema.js'

/**
 * The SQL of published apps: every version's package (immutable once stored), each app's active
 * version, and what each node runs of each app. PostgreSQL is the cluster's one source of truth for
 * them; a node reads the active versions when it starts and again when it hears APPS_CHANNEL.
 *
 * Functions take `db` first: a Kysely instance on the pool, or the caller's transaction (a route
 * writes its audit row in the same one). A change that needs several statements runs in its own
 * transaction when given the pool. Changes lock a version's row before its app's row, all of them.
 */

type Db = Kysely<Database>

/**
 * LISTEN/NOTIFY channel every node listens on; the payload is the name of an app whose active
 * version changed (or which was deleted). Sent in the transaction of the change, so that it is
 * delivered when, and only if, the change commits.
 */
export const APPS_CHANNEL = 'reaktor_apps'

// Here rather than in errors.ts (which re-exports them): errors.ts brings in the configuration and
// the whole scheduler, and the nodes that apply packages need only this module.
export const PackageVersionExists = createError('REAKTOR_PACKAGE_VERSION_EXISTS', 'App %s@%s is already published with other contents (sha256 %s…); versions are immutable: publish a new version', 409)
export const UnknownApp = createError('REAKTOR_UNKNOWN_APP', 'No app named %s is published', 404)
export const UnknownAppVersion = createError('REAKTOR_UNKNOWN_APP_VERSION', 'App %s has no version %s; its versions, newest first: %s', 404)
export const ActiveVersionDelete = createError('REAKTOR_ACTIVE_VERSION_DELETE', 'App %s@%s is active; activate another version first, or delete the app', 409)

/** The versions an UnknownAppVersion names at most. */
export const LISTED_VERSIONS = 10

/** A package to store: what the archive reader found in it, and its bytes as uploaded. */
export interface PackageInput {
  name: string
  version: string
  /** Hex SHA-256 of `bytes`. */
  sha256: string
  /** Bytes of the archive (`bytes.length`). */
  size: number
  unpackedSize: number
  entries: number
  /** The archive's package.json. */
  manifest: Record<string, unknown>
  bytes: Buffer
}

export interface StoreResult {
  /** False when this version was stored already, with the same bytes (a repeated publish). */
  stored: boolean
  /** Whether this call made the version the active one (false when it was active already, or not asked). */
  activated: boolean
  /** The app's active version before the call; null when it had none. */
  previous: string | null
}

export interface Activation {
  /** The active version before the call; null when the app had none. */
  previous: string | null
  /** False when the version was active already. */
  changed: boolean
}

/** One app as listed: never a package's bytes. */
export interface AppSummary {
  name: string
  /** Null while none of its versions was ever activated. */
  activeVersion: string | null
  changedAt: Date | null
  changedBy: string | null
  versions: number
  latestPublishedAt: Date
}

export interface AppVersionView {
  version: string
  sha256: string
  size: number
  unpackedSize: number
  entries: number
  publishedAt: Date
  publishedBy: string | null
}

/** What one node runs of an app, and why not the active version when it does not. */
export interface NodeState {
  /** Null: the node runs none of the app's versions. */
  version: string | null
  since: Date | null
  error: string | null
}

export interface NodeStateView extends NodeState {
  nodeId: string
  updatedAt: Date
}

export interface AppDetails {
  name: string
  activeVersion: string | null
  changedAt: Date | null
  changedBy: string | null
  /** Newest first. */
  versions: AppVersionView[]
  /** By node id. */
  nodes: NodeStateView[]
}

export interface DeletedApp {
  /** The version that was active; null when none was. */
  activeVersion: string | null
  /** How many versions were deleted. */
  versions: number
}

/** Runs `fn` in the caller's transaction when `db` is one, else in a transaction of its own. */
async function atomically<T> (db: Db, fn: (trx: Db) => Promise<T>): Promise<T> {
  if (db.isTransaction) return await fn(db)
  return await db.transaction().execute(fn)
}

async function announce (db: Db, name: string): Promise<void> {
  await sql`select pg_notify(${APPS_CHANNEL}, ${name})`.execute(db)
}

/** Newest first: the order of listings, and of the versions an error names. */
const NEWEST_FIRST = sql`published_at desc, version desc`

/** The error for a version that is not stored: UnknownApp when the app has none at all. */
async function missingVersion (db: Db, name: string, version: string): Promise<Error> {
  const { rows } = await sql<{ version: string, total: string }>`
    select version, count(*) over () as total from app_packages where name = ${name}
    order by ${NEWEST_FIRST} limit ${LISTED_VERSIONS}
  `.execute(db)
  if (rows.length === 0) return new UnknownApp(name)
  const more = Number(rows[0].total) - rows.length
  const listed = rows.map((r) => r.version).join(', ') + (more > 0 ? ` (and ${more} older)` : '')
  return new UnknownAppVersion(name, version, listed)
}

/**
 * Makes `version` the app's active one (it must be stored), announcing a change. The app's row is
 * locked first, so that `previous` is the version this change replaced, even while others change it.
 */
async function setActive (trx: Db, name: string, version: string, by: string | null): Promise<Activation> {
  for (;;) {
    const current = await trx.selectFrom('apps').select('active_version').where('name', '=', name).forUpdate().executeTakeFirst()
    if (current !== undefined) {
      if (current.active_version === version) return { previous: version, changed: false }
      await trx.updateTable('apps').set({ active_version: version, changed_at: sql<Date>`now()`, changed_by: by }).where('name', '=', name).execute()
      await announce(trx, name)
      return { previous: current.active_version, changed: true }
    }
    const inserted = await trx.insertInto('apps').values({ name, active_version: version, changed_by: by })
      .onConflict((oc) => oc.column('name').doNothing()).returning('name').executeTakeFirst()
    if (inserted !== undefined) {
      await announce(trx, name)
      return { previous: null, changed: true }
    }
    // Another transaction activated the app's first version since the read above: the next read
    // (a statement of its own) sees its row, and waits for its lock.
  }
}

/** Refuses a package whose digest or size does not describe its bytes: every node would refuse it. */
function checkDescribes (pkg: PackageInput): void {
  const digest = createHash('sha256').update(pkg.bytes).digest('hex')
  if (digest !== pkg.sha256 || pkg.size !== pkg.bytes.length) {
    throw new Error(`the package ${pkg.name}@${pkg.version} was described with sha256 ${pkg.sha256} and size ${pkg.size}, but its bytes have sha256 ${digest} and size ${pkg.bytes.length}`)
  }
}

/**
 * Inserts a version unless it is stored; true when this call stored it. A version stored with other
 * bytes is refused. Of two publishes of one version at once, the second waits on the first's row and
 * then compares with what it committed; the row it finds is locked (key share) against deletion.
 */
async function insertPackage (trx: Db, pkg: PackageInput, by: string | null): Promise<boolean> {
  for (;;) {
    const inserted = await trx.insertInto('app_packages').values({
      name: pkg.name,
      version: pkg.version,
      sha256: pkg.sha256,
      size: pkg.size,
      unpacked_size: pkg.unpackedSize,
      entries: pkg.entries,
      manifest: JSON.stringify(pkg.manifest),
      bytes: pkg.bytes,
      published_by: by
    }).onConflict((oc) => oc.columns(['name', 'version']).doNothing()).returning('version').executeTakeFirst()
    if (inserted !== undefined) return true
    const stored = await trx.selectFrom('app_packages').select('sha256')
      .where('name', '=', pkg.name).where('version', '=', pkg.version).forKeyShare().executeTakeFirst()
    if (stored === undefined) continue // deleted since the insert found it: insert again
    if (stored.sha256 !== pkg.sha256) throw new PackageVersionExists(pkg.name, pkg.version, stored.sha256.slice(0, 12))
    return false
  }
}

/**
 * Stores a version of an app, and makes it the active one when `activate`. A version stored already
 * with the same bytes is left as it is (a repeated publish, still activated when asked); with other
 * bytes it is refused (PackageVersionExists): versions are immutable.
 */
export async function storePackage (db: Db, pkg: PackageInput, by: string | null, activate: boolean): Promise<StoreResult> {
  checkDescribes(pkg)
  return await atomically(db, async (trx) => {
    const stored = await insertPackage(trx, pkg, by)
    if (!activate) {
      const current = await trx.selectFrom('apps').select('active_version').where('name', '=', pkg.name).executeTakeFirst()
      return { stored, activated: false, previous: current?.active_version ?? null }
    }
    const { previous, changed } = await setActive(trx, pkg.name, pkg.version, by)
    return { stored, activated: changed, previous }
  })
}

/**
 * Makes a stored version the app's active one (a rollback is the activation of an older one).
 * The version's row is locked (key share) first: a deletion of it either commits before (the
 * version is then unknown) or waits for this activation (and is then refused: it is active).
 */
export async function activateVersion (db: Db, name: string, version: string, by: string | null): Promise<Activation> {
  return await atomically(db, async (trx) => {
    const stored = await trx.selectFrom('app_packages').select('version')
      .where('name', '=', name).where('version', '=', version).forKeyShare().executeTakeFirst()
    if (stored === undefined) throw await missingVersion(trx, name, version)
    return await setActive(trx, name, version, by)
  })
}

/** Every app that has a stored version, by name: never a package's bytes. */
export async function listApps (db: Db): Promise<AppSummary[]> {
  const rows = await db.selectFrom('app_packages as p')
    .leftJoin('apps as a', 'a.name', 'p.name')
    .select((eb) => [
      'p.name', 'a.active_version', 'a.changed_at', 'a.changed_by',
      eb.fn.countAll<string>().as('versions'),
      eb.fn.max('p.published_at').as('latest_published_at')
    ])
    .groupBy(['p.name', 'a.active_version', 'a.changed_at', 'a.changed_by'])
    .orderBy('p.name')
    .execute()
  return rows.map((r) => ({
    name: r.name,
    activeVersion: r.active_version,
    changedAt: r.changed_at,
    changedBy: r.changed_by,
    versions: Number(r.versions),
    latestPublishedAt: r.latest_published_at
  }))
}

/** One app: its versions (newest first, never their bytes) and what each node runs of it. */
export async function showApp (db: Db, name: string): Promise<AppDetails> {
  const versions = await db.selectFrom('app_packages')
    .select(['version', 'sha256', 'size', 'unpacked_size', 'entries', 'published_at', 'published_by'])
    .where('name', '=', name).orderBy(NEWEST_FIRST).execute()
  if (versions.length === 0) throw new UnknownApp(name)
  const app = await db.selectFrom('apps').select(['active_version', 'changed_at', 'changed_by']).where('name', '=', name).executeTakeFirst()
  const nodes = await db.selectFrom('app_node_states').select(['node_id', 'version', 'since', 'error', 'updated_at'])
    .where('name', '=', name).orderBy('node_id').execute()
  return {
    name,
    activeVersion: app?.active_version ?? null,
    changedAt: app?.changed_at ?? null,
    changedBy: app?.changed_by ?? null,
    versions: versions.map((v) => ({
      version: v.version,
      sha256: v.sha256,
      size: v.size,
      unpackedSize: Number(v.unpacked_size),
      entries: v.entries,
      publishedAt: v.published_at,
      publishedBy: v.published_by
    })),
    nodes: nodes.map((n) => ({ nodeId: n.node_id, version: n.version, since: n.since, error: n.error, updatedAt: n.updated_at }))
  }
}

/** A version's archive as uploaded, with its digest (what a node checks after reading it). */
export async function readPackage (db: Db, name: string, version: string): Promise<{ sha256: string, bytes: Buffer } | undefined> {
  return await db.selectFrom('app_packages').select(['sha256', 'bytes'])
    .where('name', '=', name).where('version', '=', version).executeTakeFirst()
}

/**
 * Deletes a version that is not the active one (ActiveVersionDelete otherwise). Its row is locked
 * first: an activation of it either committed before (the version is then found active) or waits
 * for this deletion (and then finds it unknown). Nothing nodes run changes: no announcement.
 */
export async function deleteVersion (db: Db, name: string, version: string): Promise<void> {
  await atomically(db, async (trx) => {
    const stored = await trx.selectFrom('app_packages').select('version')
      .where('name', '=', name).where('version', '=', version).forUpdate().executeTakeFirst()
    if (stored === undefined) throw await missingVersion(trx, name, version)
    const app = await trx.selectFrom('apps').select('active_version').where('name', '=', name).executeTakeFirst()
    if (app?.active_version === version) throw new ActiveVersionDelete(name, version)
    await trx.deleteFrom('app_packages').where('name', '=', name).where('version', '=', version).execute()
  })
}

/** Deletes an app: its active version, every version, every node's state of it; every node unloads it. */
export async function deleteApp (db: Db, name: string): Promise<DeletedApp> {
  return await atomically(db, async (trx) => {
    // Locked in the order every change takes them (the versions', then the app's): this waits for
    // an activation that holds a version, where taking the app's row first would deadlock with it.
    await trx.selectFrom('app_packages').select('version').where('name', '=', name).orderBy('version').forUpdate().execute()
    await trx.deleteFrom('app_node_states').where('name', '=', name).execute()
    const app = await trx.deleteFrom('apps').where('name', '=', name).returning('active_version').executeTakeFirst()
    const { numDeletedRows } = await trx.deleteFrom('app_packages').where('name', '=', name).executeTakeFirstOrThrow()
    const versions = Number(numDeletedRows)
    if (app === undefined && versions === 0) throw new UnknownApp(name)
    await announce(trx, name)
    return { activeVersion: app?.active_version ?? null, versions }
  })
}

/** Every app's active version, by name: what every node should run. */
export async function activeVersions (db: Db): Promise<Map<string, string>> {
  const rows = await db.selectFrom('apps').select(['name', 'active_version']).execute()
  return new Map(rows.map((r) => [r.name, r.active_version]))
}

/** Records what a node runs of an app (replacing what it recorded before). */
export async function recordNodeState (db: Db, nodeId: string, name: string, state: NodeState): Promise<void> {
  await db.insertInto('app_node_states')
    .values({ node_id: nodeId, name, version: state.version, since: state.since, error: state.error })
    .onConflict((oc) => oc.columns(['node_id', 'name']).doUpdateSet((eb) => ({
      version: eb.ref('excluded.version'),
      since: eb.ref('excluded.since'),
      error: eb.ref('excluded.error'),
      updated_at: sql<Date>`now()`
    })))
    .execute()
}

/** Deletes a node's states of the apps not in `keep` (those it no longer runs); returns how many. */
export async function forgetNodeStates (db: Db, nodeId: string, keep: readonly string[]): Promise<number> {
  const { numDeletedRows } = await db.deleteFrom('app_node_states')
    .where('node_id', '=', nodeId)
    .where(sql<boolean>`name <> all(${[...keep]}::text[])`)
    .executeTakeFirstOrThrow()
  return Number(numDeletedRows)
}

/** The sha256 of a stored version (not its bytes), or undefined when there is none. */
export async function packageSha (db: Db, name: string, version: string): Promise<string | undefined> {
  const row = await db.selectFrom('app_packages').select('sha256').where('name', '=', name).where('version', '=', version).executeTakeFirst()
  return row?.sha256
}
