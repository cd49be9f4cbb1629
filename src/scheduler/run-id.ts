import { randomFillSync } from 'node:crypto'

const HEX = Array.from({ length: 256 }, (_v, i) => i.toString(16).padStart(2, '0'))
/** Random bytes drawn in blocks: one system call per 409 ids instead of one per id. */
const pool = Buffer.alloc(4096)
let at = pool.length

/**
 * A run id: a UUID of version 7 (RFC 9562): the wall-clock millisecond in its first 48 bits, then 74
 * random bits. Unique like a random UUID, and time-ordered, so the history's unique index on run
 * ids grows at one end instead of touching a random page per run (less WAL, less cache).
 */
export function newRunId (ms: number = Date.now()): string {
  if (at + 10 > pool.length) {
    randomFillSync(pool)
    at = 0
  }
  const r = pool
  const i = at
  at += 10
  const time = Math.max(0, Math.floor(ms)).toString(16).padStart(12, '0').slice(-12)
  return `${time.slice(0, 8)}-${time.slice(8)}-7${HEX[r[i] & 0x0f].slice(1)}${HEX[r[i + 1]]}-` +
    `${HEX[(r[i + 2] & 0x3f) | 0x80]}${HEX[r[i + 3]]}-` +
    `${HEX[r[i + 4]]}${HEX[r[i + 5]]}${HEX[r[i + 6]]}${HEX[r[i + 7]]}${HEX[r[i + 8]]}${HEX[r[i + 9]]}`
}
