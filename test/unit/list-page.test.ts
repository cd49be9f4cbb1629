import t from 'tap'
import { ReaktorList, type ListQuery } from '../../src/polling/list-page.js'
import { LIST_SORTS, type PollingStatusType } from '../../src/schemas/polling.js'

function status (id: string, fields: Partial<PollingStatusType> = {}): PollingStatusType {
  return {
    reaktorDefinitionId: id,
    app: 'app',
    state: 'stopped',
    interval: '1m',
    effectiveInterval: '1m',
    lastRun: null,
    nextRun: null,
    updatedAt: null,
    label: null,
    description: null,
    autoStart: false,
    lastError: null,
    consecutiveFailures: 0,
    blocked: false,
    owner: null,
    lastSuccessAt: null,
    lastFailureAt: null,
    lastDurationMs: null,
    lastOutcome: null,
    runningSince: null,
    ...fields
  }
}

function ids (list: ReaktorList, query: Partial<ListQuery>): string[] {
  return list.page({ sort: 'id', order: 'asc', limit: 1000, offset: 0, ...query }).pollingReaktors.map((s) => s.reaktorDefinitionId)
}

t.test('timestamps, owners and outcomes: nulls last in both orders, ties by id ascending', async (t) => {
  // Listed by id, as a read returns them.
  const list = new ReaktorList([
    status('a', { lastRun: '2026-01-02T00:00:00.000Z', lastOutcome: 'failed', owner: 'n1' }),
    status('b', { lastSuccessAt: '2026-01-01T00:00:00.000Z' }),
    status('c', { lastRun: '2026-01-02T00:00:00.000Z', lastSuccessAt: '2026-01-03T00:00:00.000Z', lastOutcome: 'no_work', owner: 'n1' }),
    status('d', { lastRun: '2026-01-01T00:00:00.000Z', lastOutcome: 'failed', owner: 'n0' })
  ])
  t.same(ids(list, { sort: 'lastRun' }), ['d', 'a', 'c', 'b'])
  t.same(ids(list, { sort: 'lastRun', order: 'desc' }), ['a', 'c', 'd', 'b'], 'desc: a tie still by id ascending, the null still last')
  t.same(ids(list, { sort: 'lastSuccessAt' }), ['b', 'c', 'a', 'd'])
  t.same(ids(list, { sort: 'lastSuccessAt', order: 'desc' }), ['c', 'b', 'a', 'd'])
  t.same(ids(list, { sort: 'lastOutcome' }), ['a', 'd', 'c', 'b'])
  t.same(ids(list, { sort: 'lastOutcome', order: 'desc' }), ['c', 'a', 'd', 'b'])
  t.same(ids(list, { sort: 'owner' }), ['d', 'a', 'c', 'b'])
  t.same(ids(list, { sort: 'owner', order: 'desc' }), ['a', 'c', 'd', 'b'])
  t.same(ids(list, { sort: 'nextRun', order: 'desc' }), ['a', 'b', 'c', 'd'], 'all null: by id')
})

t.test('pages of any size make up the whole list, for every sort and order, with many ties and nulls', async (t) => {
  // A fixed pseudo-random mix: few distinct values, so most comparisons are ties or nulls.
  let seed = 7
  const next = (n: number): number => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n }
  const pick = <T>(values: T[]): T => values[next(values.length)]
  const statuses = Array.from({ length: 300 }, (_v, i) => status(`r${String(i).padStart(3, '0')}`, {
    app: pick(['x', 'y', 'z']),
    state: pick(['running', 'stopped'] as const),
    interval: pick(['1s', '60s', '1m', '2h']),
    label: pick([null, 'A', 'b', 'B']),
    lastRun: pick([null, '2026-01-01T00:00:00.000Z', '2026-01-02T00:00:00.000Z']),
    nextRun: pick([null, '2026-01-03T00:00:00.000Z']),
    lastSuccessAt: pick([null, '2026-01-01T00:00:00.000Z']),
    consecutiveFailures: pick([0, 0, 1, 5]),
    owner: pick([null, 'n1', 'n2']),
    lastOutcome: pick([null, 'failed', 'more_work', 'no_work'] as const)
  }))
  const list = new ReaktorList(statuses)
  for (const sort of LIST_SORTS) {
    for (const order of ['asc', 'desc'] as const) {
      for (const filter of [{}, { state: 'running' as const, failing: false }]) {
        const whole = ids(list, { sort, order, ...filter })
        const paged: string[] = []
        let total = -1
        for (let offset = 0; offset <= whole.length; offset += 7) {
          const page = list.page({ sort, order, limit: 7, offset, ...filter })
          total = page.total
          paged.push(...page.pollingReaktors.map((s) => s.reaktorDefinitionId))
        }
        const name = `${sort} ${order}${Object.keys(filter).length > 0 ? ' filtered' : ''}`
        t.same(paged, whole, `${name}: pages of 7 make up the whole`)
        t.equal(total, whole.length, `${name}: total`)
        t.equal(new Set(whole).size, whole.length, `${name}: no id twice`)
        // Each neighbour pair in order: by value (nulls last), then by id.
        const byId = new Map(statuses.map((s) => [s.reaktorDefinitionId, s]))
        const field = sort === 'id' ? 'reaktorDefinitionId' : sort
        const value = (id: string): unknown => sort === 'interval' ? { '1s': 1, '60s': 60, '1m': 60, '2h': 7200 }[byId.get(id)!.interval] : byId.get(id)![field]
        const bad = whole.slice(1).findIndex((id, i) => {
          const [a, b] = [value(whole[i]), value(id)]
          if (a === null || b === null) return a === null ? b !== null || whole[i] > id : false
          if (a === b) return whole[i] > id
          return order === 'asc' ? (a as number) > (b as number) : (a as number) < (b as number)
        })
        t.equal(bad, -1, `${name}: in order, nulls last, ties by id (first misplaced at ${bad})`)
      }
    }
  }
  t.same(list.counts, {
    all: 300,
    running: statuses.filter((s) => s.state === 'running').length,
    stopped: statuses.filter((s) => s.state === 'stopped').length,
    failing: statuses.filter((s) => s.consecutiveFailures > 0).length
  })
})

t.test('q matches within the id, the label or the app name, not across them', async (t) => {
  const list = new ReaktorList([status('mail', { label: 'Send Digest', app: 'post' }), status('other', { app: 'mailer' })])
  t.same(ids(list, { q: 'DIGEST' }), ['mail'])
  t.same(ids(list, { q: 'MAILER' }), ['other'])
  t.same(ids(list, { q: 'mail' }), ['mail', 'other'])
  t.same(ids(list, { q: 'mailsend' }), [], 'id and label do not run together')
  t.same(ids(list, { q: 'digestpost' }), [])
})
