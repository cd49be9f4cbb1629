import { UnknownReaktorError } from '../scheduler/index.js'
import type { PollingStatusType } from '../schemas/polling.js'
import { coalesce, type SharedRead } from './coalesce.js'
import type { StatusCache } from './status-cache.js'
import { readStatuses, type StatusSource } from './status.js'

/** Turns an answer into its JSON through the route's response schema (a Fastify reply is one). */
export interface Serializer { serialize: (value: any) => unknown }

/** The cache key of the list; a reaktor's status is cached under its id. */
const LIST = ''

/**
 * The read side of polling: status and list as the API shows them. `status`/`list` read the
 * database; `statusJson`/`listJson` answer a request: from the status cache once it has confirmed
 * that no start/stop committed before the request was missed, otherwise from a database read
 * started after the request arrived (shared by the requests of that turn, serialized once), which
 * is then cached. See status-cache.ts for why that is as right as a read per request.
 */
export class PollingReads {
  /** Answers served from memory, and database reads behind the answers (metrics, tests). */
  hits = 0
  reads = 0
  private readonly readStatus: (key: string) => SharedRead<PollingStatusType>
  private readonly readList: (key: string) => SharedRead<{ pollingReaktors: PollingStatusType[] }>

  constructor (private readonly source: StatusSource, private readonly cache: StatusCache) {
    const generation = (): number => cache.generation
    this.readStatus = coalesce(async (id) => await this.status(id), generation)
    this.readList = coalesce(async () => ({ pollingReaktors: await this.list() }), generation)
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

  async statusJson (reaktorId: string, serializer: Serializer): Promise<string> {
    if (!this.source.reaktors.has(reaktorId)) throw new UnknownReaktorError(reaktorId)
    return await this.answer(reaktorId, this.readStatus, serializer)
  }

  async listJson (serializer: Serializer): Promise<string> {
    return await this.answer(LIST, this.readList, serializer)
  }

  /** A start or stop through this node: forget its answers now (the NOTIFY does it on every node). */
  changed (reaktorId: string): void {
    this.cache.invalidate(reaktorId)
  }

  private async answer<T>(key: string, read: (key: string) => SharedRead<T>, serializer: Serializer): Promise<string> {
    if (this.cache.get(key) !== undefined && await this.cache.sync()) {
      const json = this.cache.get(key)
      if (json !== undefined) {
        this.hits++
        return json
      }
    }
    const shared = read(key)
    const value = await shared.value
    if (shared.json === undefined) {
      this.reads++
      shared.json = String(serializer.serialize(value))
      this.cache.set(key, shared.json, shared.generation, shared.readAt)
    }
    return shared.json
  }
}
