import t from 'tap'
import { normalizeUsername, usernameProblem, USERNAME_MAX } from '../../src/lib/user-rules.js'

t.test('usernames are trimmed, then 1 to 64 printable characters', async (t) => {
  t.equal(normalizeUsername(' \t Alice \n'), 'Alice')
  for (const good of ['a', 'Alice Smith', 'o\'brien', 'émile', '山田', '\u{1F600}'.repeat(USERNAME_MAX), 'x'.repeat(USERNAME_MAX), `  ${'x'.repeat(USERNAME_MAX)}  `]) {
    t.equal(usernameProblem(good), null, `${JSON.stringify(good.slice(0, 20))} is valid`)
  }
  t.equal(usernameProblem(''), 'username: at least 1 character after trimming spaces')
  t.equal(usernameProblem(' \u00A0\u3000 '), 'username: at least 1 character after trimming spaces', 'any kind of space is trimmed')
  t.equal(usernameProblem('x'.repeat(USERNAME_MAX + 1)), 'username: at most 64 characters')
  const unprintable = 'username: printable characters only (no control, format, unassigned or line-separator characters)'
  const cases: Record<string, string> = {
    control: 'a\u0007b',
    'inner tab': 'a\tb',
    delete: 'a\u007Fb',
    'C1 control': 'a\u0085b',
    'zero-width space (format)': 'a\u200Bb',
    'right-to-left override (format)': 'a\u202Eb',
    'byte order mark (format)': 'a\uFEFFb',
    unassigned: 'a\u0378b',
    'line separator': 'a\u2028b',
    'paragraph separator': 'a\u2029b',
    'lone surrogate': 'a\uD800b',
    'private use': 'a\uE000b'
  }
  for (const [what, name] of Object.entries(cases)) t.equal(usernameProblem(name), unprintable, what)
  for (const name of ['.', '..', ' .. ']) t.equal(usernameProblem(name), 'username: not "." or "..", which a URL path cannot carry', JSON.stringify(name))
  for (const name of ['...', '.a', 'a.b']) t.equal(usernameProblem(name), null, `${JSON.stringify(name)} is valid`)
})
