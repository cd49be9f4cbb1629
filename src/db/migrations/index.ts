import type { Migration } from 'kysely'
import * as initial from './20261123000000_initial.js'
import * as polling from './20261124000000_polling.js'
import * as partitions from './20261125000000_partitions.js'
import * as sessionTokenKey from './20261126000000_session_token_key.js'
import * as blockedRuns from './20261126000100_blocked_runs.js'
import * as untaggedSessions from './20261126000200_untagged_sessions.js'
import * as runHistory from './20261127000000_run_history.js'
import * as runRequests from './20261127000300_run_requests.js'
import * as accounts from './20261128000000_accounts.js'
import * as auditFilters from './20261128000300_audit_filters.js'
import * as appPackages from './20261129000000_app_packages.js'

/**
 * Every migration, by its timestamped name. An explicit list (not a folder scan) works the same
 * from TypeScript sources and from the compiled build. Append new migrations here.
 */
export const migrations: Record<string, Migration> = {
  '20261123000000_initial': initial,
  '20261124000000_polling': polling,
  '20261125000000_partitions': partitions,
  '20261126000000_session_token_key': sessionTokenKey,
  '20261126000100_blocked_runs': blockedRuns,
  '20261126000200_untagged_sessions': untaggedSessions,
  '20261127000000_run_history': runHistory,
  '20261127000300_run_requests': runRequests,
  '20261128000000_accounts': accounts,
  '20261128000300_audit_filters': auditFilters,
  '20261129000000_app_packages': appPackages
}
