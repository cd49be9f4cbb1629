import path from 'node:path'

/** The repository's root folder: the service's own processes are started from here. */
export const ROOT = path.resolve(import.meta.dirname, '..', '..')

/** The example apps shipped in reaktor-apps/. */
export const EXAMPLE_APPS_DIR = path.join(ROOT, 'reaktor-apps')

/** The ledger app the cluster tests run (`REAKTOR_APPS_DIR` of their nodes). */
export const CLUSTER_APPS_DIR = path.join(ROOT, 'test', 'fixtures', 'cluster-app')

/** Screenshots of the browser tests (ignored by git). */
export const ARTIFACTS_DIR = path.join(ROOT, 'test', 'artifacts')
