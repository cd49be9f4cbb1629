import { parseDuration } from '../lib/duration.js'
import type { LIST_SORTS, PollingStatusType } from '../schemas/polling.js'
export type ListSort = typeof LIST_SORTS[number]
export type ListOrder = 'asc' | 'desc'

export interface ListQuery {
  /** Case-insensitive substring of id, label or app name. */
  q?: string
  state?: 'running' | 'stopped'
  /** true: consecutiveFailures > 0; false: none. */
  failing?: boolean
  /** An app name, exact. */
  app?: string
  sort: ListSort
  order: ListOrder
  limit: number
  offset: number
}

export interface ListCounts { all: number, running: number, stopped: number, failing: number }

export interface ListPage {
  pollingReaktors: PollingStatusType[]
  total: number
  offset: number
  limit: number
  counts: ListCounts
}

/** Turns an answer into its JSON through the route's response schema (a Fastify reply is one). */
export interface Serializer { serialize: (value: any) => unknown }

type SortValue = string | number | null

/** What each sort compares; ISO timestamps of one format compare as text. */
const SORT_VALUE: Record<ListSort, (s: PollingStatusType) => SortValue> = {
  id: (s) => s.reaktorDefinitionId,
  label: (s) => s.label,
  app: (s) => s.app,
  state: (s) => s.state,
  // The registered interval's length, so 90s sorts after 1m.
  interval: (s) => parseDuration(s.interval),
  lastRun: (s) => s.lastRun,
  nextRun: (s) => s.nextRun,
  lastSuccessAt: (s) => s.lastSuccessAt,
  consecutiveFailures: (s) => s.consecutiveFailures,
  owner: (s) => s.owner,
  lastOutcome: (s) => s.lastOutcome
}

function compareValues (a: SortValue, b: SortValue): number {
  return a === b ? 0 : (a as string | number) < (b as string | number) ? -1 : 1
}

/**
 * One read of every registered reaktor's status (sorted by id), as the status cache keeps it: the
 * full answer's JSON and the pages cut from it are both derived here, once per read, so a filtered
 * page served from memory costs a walk over the objects, neither a database read nor a parse of
 * the JSON. Sort orders are computed on first use and kept with the read.
 */
export class ReaktorList {
  readonly counts: ListCounts
  private fullJson: string | undefined
  private readonly orders = new Map<string, readonly number[]>()
  private haystacks: string[] | undefined

  constructor (readonly statuses: readonly PollingStatusType[]) {
    let running = 0
    let failing = 0
    for (const s of statuses) {
      if (s.state === 'running') running++
      if (s.consecutiveFailures > 0) failing++
    }
    this.counts = { all: statuses.length, running, stopped: statuses.length - running, failing }
  }

  /** The answer without query parameters: every status, sorted by id. */
  json (serializer: Serializer): string {
    this.fullJson ??= String(serializer.serialize({ pollingReaktors: this.statuses }))
    return this.fullJson
  }

  page (query: ListQuery): ListPage {
    const matches = this.matcher(query)
    const order = this.order(query.sort, query.order)
    const end = query.offset + query.limit
    const pollingReaktors: PollingStatusType[] = []
    let total = 0
    for (const i of order) {
      if (!matches(i)) continue
      if (total >= query.offset && total < end) pollingReaktors.push(this.statuses[i])
      total++
    }
    return { pollingReaktors, total, offset: query.offset, limit: query.limit, counts: this.counts }
  }

  private matcher ({ q, state, failing, app }: ListQuery): (i: number) => boolean {
    const needle = q?.toLowerCase()
    const haystacks = needle === undefined ? undefined : this.searchText()
    return (i) => {
      const s = this.statuses[i]
      return (state === undefined || s.state === state) &&
        (failing === undefined || (s.consecutiveFailures > 0) === failing) &&
        (app === undefined || s.app === app) &&
        (needle === undefined || haystacks![i].includes(needle))
    }
  }

  /** Id, label and app name of each, lowercased; NUL (which no query text holds) keeps a match inside one of them. */
  private searchText (): string[] {
    this.haystacks ??= this.statuses.map((s) => `${s.reaktorDefinitionId}\u0000${s.label ?? ''}\u0000${s.app}`.toLowerCase())
    return this.haystacks
  }

  /** Indexes in page order: by the column, nulls last in both orders, then by id (the read's order). */
  private order (sort: ListSort, direction: ListOrder): readonly number[] {
    const key = `${sort} ${direction}`
    let order = this.orders.get(key)
    if (order === undefined) {
      const value = SORT_VALUE[sort]
      const values = this.statuses.map(value)
      const sign = direction === 'asc' ? 1 : -1
      order = this.statuses.map((_s, i) => i).sort((a, b) => {
        const va = values[a]
        const vb = values[b]
        if (va === null || vb === null) return va === vb ? a - b : va === null ? 1 : -1
        return sign * compareValues(va, vb) || a - b
      })
      this.orders.set(key, order)
    }
    return order
  }
}
