import t from 'tap'
import { cookieValues } from '../../src/auth/session-cookie.js'

/** The plain reading the in-place one must agree with: split on `;`, trim, unquote, decode. */
function reference (header: string | undefined, name: string): string[] {
  if (header === undefined) return []
  const values: string[] = []
  for (const part of header.split(';')) {
    const eq = part.indexOf('=')
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue
    let value = part.slice(eq + 1).trim()
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1)
    try {
      value = decodeURIComponent(value)
    } catch {
      // kept as sent
    }
    if (!values.includes(value)) values.push(value)
  }
  return values
}

t.test('cookieValues reads what a plain split-trim-decode reads', async (t) => {
  const name = 'reaktor_session'
  const cases = [
    undefined, '', 'reaktor_session=abc', ' reaktor_session = abc ; other=1', 'other=1; reaktor_session=a; reaktor_session=b; reaktor_session=a',
    'xreaktor_session=1; reaktor_sessionx=2', 'reaktor_session="quoted"', 'reaktor_session=%41%42', 'reaktor_session=%E0%A4%A', 'reaktor_session',
    'a=reaktor_session=1', '\u00a0reaktor_session=nbsp', 'reaktor_session=;reaktor_session=', ';;;', '=reaktor_session', 'reaktor_session=a=b;'
  ]
  for (const header of cases) t.same(cookieValues(header, name), reference(header, name), JSON.stringify(header))
  // Random headers built from the pieces that matter.
  const pieces = [name, 'other', '=', ';', ' ', '"', '%', '%41', 'x', '\u00a0', 'tok']
  let seed = 7
  // xorshift32: exact in 32-bit integers (a plain LCG in doubles loses its low bits).
  const random = (n: number): number => {
    seed ^= seed << 13
    seed ^= seed >>> 17
    seed ^= seed << 5
    return (seed >>> 0) % n
  }
  let checked = 0
  for (let i = 0; i < 5000; i++) {
    const header = Array.from({ length: 1 + random(12) }, () => pieces[random(pieces.length)]).join('')
    const got = cookieValues(header, name)
    const want = reference(header, name)
    if (JSON.stringify(got) !== JSON.stringify(want)) t.same(got, want, JSON.stringify(header))
    else checked++
  }
  t.equal(checked, 5000, 'every random header read the same')
})

t.test('a header of many parts: the cookie after 16 KiB of empty parts (the most Node accepts by default)', async (t) => {
  const header = ';'.repeat(16 * 1024) + 'reaktor_session=x'
  const started = performance.now()
  t.same(cookieValues(header, 'reaktor_session'), ['x'])
  t.same(cookieValues(header, 'reaktor_session'), reference(header, 'reaktor_session'))
  t.comment(`read in ${(performance.now() - started).toFixed(1)} ms (one pass; a search to the end of the header for each part took seconds)`)
})
