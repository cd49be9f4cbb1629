/**
 * The service's password hashing cost, in a process that never lowers it (no test helper that
 * builds a service is imported here): OWASP's scrypt setting, written into every hash.
 */
import fs from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { hashPassword, PASSWORD_PARAMS, verifyPassword } from '../../src/auth/password.js'
import { ROOT } from '../helpers/paths.js'

t.test('passwords are hashed with scrypt N=2^15, r=8, p=3 unless a test suite lowers it', async (t) => {
  t.same(PASSWORD_PARAMS, { N: 32768, r: 8, p: 3 })
  const hash = await hashPassword('correct horse battery staple')
  t.match(hash, /^scrypt\$32768\$8\$3\$[A-Za-z0-9+/=]{24}\$[A-Za-z0-9+/=]{44}$/)
  t.equal(await verifyPassword('correct horse battery staple', hash), true)
})

t.test('the service never lowers it: only its own module names the test switch', async (t) => {
  const src = path.join(ROOT, 'src')
  const files = (await fs.readdir(src, { recursive: true })).filter((f) => f.endsWith('.ts'))
  t.ok(files.length > 50, `the sources are read (${files.length})`)
  const naming = []
  for (const file of files) {
    if ((await fs.readFile(path.join(src, file), 'utf8')).includes('lowerPasswordCostForTests')) naming.push(file)
  }
  t.same(naming, [path.join('auth', 'password.ts')])
})
