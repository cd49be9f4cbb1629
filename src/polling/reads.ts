import { UnknownReaktorError } from '../scheduler/index.js'
import type { PollingStatusType } from '../schemas/polling.js'
import { coalesce, type SharedRead } from './coalesce.js'
import { ReaktorList, type ListQuery, type Serializer } from './list-page.js'
import type { StatusCache } from './status-cache.js'
import { readStatuses, type StatusSource } from './status.js'

/** What the status cache keeps: a reaktor's status as JSON, the list as its objects (see list-page.ts). */
export type CachedAnswer = string | ReaktorList

/** The cache key of the list; a reaktor's status is cached under its id. */
const LIST = ''

/**
 * The read side of polling: status and list as the API shows them. `status`/`list` read the
 * database; `statusJson`/`listJson`/`listPageJson` answer a request: from the status cache once it
 * has confirmed that no start/stop committed before the request was missed, otherwise from a
 * database read started after the request arrived (shared by the requests of that turn, serialized
 * once), which is then cached. See status-cache.ts for why that is as right as a read per request.
 */
export class PollingReads {
  /** Answers served from memory, and database reads behind the answers (metrics, tests). */
  hits = 0
  reads = 0
  private readonly readStatus: (key: string) => SharedRead<PollingStatusType>
  private readonly readList: (key: string) => SharedRead<ReaktorList>

  constructor (private readonly source: StatusSource, private readonly cache: StatusCache<CachedAnswer>) {
    const generation = (): number => cache.generation
    this.readStatus = coalesce(async (id) => await this.status(id), generation)
    this.readList = coalesce(async () => new ReaktorList(await this.list()), generation)
  }

  /** The status of one registered reaktor (UnknownReaktorError when it is not registered here). */
  async status (reaktorId: string): Promise<PollingStatusType> {
    const [status] = await readStatuses(this.source, [reaktorId])
    return status
  }

  /** Every registered reaktor's status, sorted by id. */
  async list (): Promise<PollingStatusType[]> {
    return await readStatuses(this.source, [...this.source.reaktors.keys()].sort())
  }

  // Not an async function: a confirmed answer costs the confirmation's promise and one more.
  statusJson (reaktorId: string, serializer: Serializer): Promise<string> {
    if (!this.source.reaktors.has(reaktorId)) return Promise.reject(new UnknownReaktorError(reaktorId))
    const confirming = this.confirm(reaktorId)
    if (confirming === undefined) return this.readStatusJson(reaktorId, serializer)
    return confirming.then((confirmed) => {
      const cached = confirmed ? this.confirmed(reaktorId) : undefined
      return typeof cached === 'string' ? cached : this.readStatusJson(reaktorId, serializer)
    })
  }

  /** statusJson without the cache: a database read (shared by the requests of this turn), then cached. */
  private async readStatusJson (reaktorId: string, serializer: Serializer): Promise<string> {
    const shared = this.readStatus(reaktorId)
    const value = await shared.value
    if (shared.json === undefined) {
      this.reads++
      shared.json = String(serializer.serialize(value))
      this.cache.set(reaktorId, shared.json, shared.generation)
    }
    return shared.json
  }

  /** The whole list, sorted by id. */
  async listJson (serializer: Serializer): Promise<string> {
    return (await this.currentList()).json(serializer)
  }

  /** One page of the list: filtered, sorted, with its total and the counts of all. */
  async listPageJson (query: ListQuery, serializer: Serializer): Promise<string> {
    return String(serializer.serialize((await this.currentList()).page(query)))
  }

  /** A start or stop through this node: forget its answers now (the NOTIFY does it on every node). */
  changed (reaktorId: string): void {
    this.cache.invalidate(reaktorId)
  }

  private async currentList (): Promise<ReaktorList> {
    const confirming = this.confirm(LIST)
    if (confirming !== undefined && await confirming) {
      const cached = this.confirmed(LIST)
      if (cached instanceof ReaktorList) return cached
    }
    const shared = this.readList(LIST)
    const list = await shared.value
    if (shared.cached !== true) {
      shared.cached = true
      this.reads++
      this.cache.set(LIST, list, shared.generation)
    }
    return list
  }

  /**
   * With a cached answer of `key`, the cache's confirmation that no start/stop before now was
   * missed (the round trip's own promise: a cached answer waits on nothing more); without one,
   * undefined.
   */
  private confirm (key: string): Promise<boolean> | undefined {
    return this.cache.get(key) === undefined ? undefined : this.cache.sync()
  }

  /** The cached answer of `key` once confirmed (it may have been dropped meanwhile), counted as a hit. */
  private confirmed (key: string): CachedAnswer | undefined {
    const cached = this.cache.get(key)
    if (cached !== undefined) this.hits++
    return cached
  }
}
