/** The command line's tables and `name: value` lines: one line per row, and nothing a terminal would act on. */
import t from 'tap'
import { formatFields, formatTable } from '../../src/cli/output.js'

const HOSTILE = 'boom\u001b]0;owned\u0007\u001b[2J\u009b31m\r\nnext\ttab\u0000'

t.test('control characters in values are shown escaped, never written raw', async (t) => {
  const table = formatTable([{ id: 'a', error: HOSTILE }], [{ header: 'ID', value: (r) => r.id }, { header: 'ERROR', value: (r) => r.error }])
  const fields = formatFields([['last error', HOSTILE]])
  for (const [name, text] of [['table', table], ['fields', fields]]) {
    // eslint-disable-next-line no-control-regex
    t.notMatch(text, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/, `${name}: no control character but the line ends`)
  }
  t.equal(table, 'ID  ERROR\na   boom\\x1b]0;owned\\x07\\x1b[2J\\x9b31m next tab\\x00\n')
  t.equal(fields, 'last error: boom\\x1b]0;owned\\x07\\x1b[2J\\x9b31m next tab\\x00\n')
})

t.test('plain values as they are; empty ones as "-"', async (t) => {
  t.equal(formatFields([['name', 'Grüße, 日本'], ['none', null], ['n', 0]]), 'name: Grüße, 日本\nnone: -\nn:    0\n')
})
