import t from 'tap'
import { newRunId } from '../../src/scheduler/run-id.js'

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

t.test('run ids: UUID version 7, the millisecond first, unique', async (t) => {
  const ms = Date.parse('2026-11-25T11:30:00.123Z')
  const id = newRunId(ms)
  t.match(id, V7, 'version 7, RFC 9562 variant')
  t.equal(parseInt(id.slice(0, 8) + id.slice(9, 13), 16), ms, 'the first 48 bits are the millisecond')
  const ids = Array.from({ length: 100_000 }, (_v, i) => newRunId(ms + Math.floor(i / 1000)))
  t.equal(new Set(ids).size, ids.length, '100,000 ids, none twice (1,000 per millisecond)')
  t.ok(ids.every((v) => V7.test(v)), 'every one well formed')
  const later = ids.filter((_v, i) => i % 1000 === 0)
  t.same([...later].sort(), later, 'ids of later milliseconds sort after earlier ones')
})
