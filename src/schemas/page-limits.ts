/**
 * The page sizes of the paged lists, apart from their schemas: the CLI checks its --limit against
 * them without loading the schema library (a few hundred modules, and a slower start of every
 * `reaktor` command).
 */

/** The bounds of a list page's `limit`: without one, a page holds up to the default. */
export const LIST_LIMIT = { min: 1, max: 1000, default: 100 } as const
export const HISTORY_LIMIT = { min: 1, max: 500, default: 20 } as const
export const AUDIT_LIMIT = { min: 1, max: 500, default: 50 } as const
