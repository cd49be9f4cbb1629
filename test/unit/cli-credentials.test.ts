/**
 * The CLI's stored login on disk when the place is not as it made it: a folder left looser, a
 * symlink planted where the temporary file goes, a folder or file another user made first (a
 * shared XDG_CONFIG_HOME).
 */
import fs from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { credentialsPath, readStoredLogin, writeStoredLogin, type StoredLogin } from '../../src/cli/credentials.js'
import { tempDir } from '../helpers/temp-dir.js'

const LOGIN: StoredLogin = { url: 'http://127.0.0.1:3000', username: 'alice', token: 'reaktor_pat_' + 'x'.repeat(43), tokenId: '6f1c0000-0000-4000-8000-000000000000' }
// A user id that is not this process's (the tests run as root; `nobody` on most systems).
const OTHER_UID = 65534

t.test('an existing folder and file with looser modes end owner-only', async (t) => {
  const env = { XDG_CONFIG_HOME: await tempDir(t, 'reaktor-cred-') }
  const file = credentialsPath(env)
  await fs.mkdir(path.dirname(file), { mode: 0o755 })
  await fs.chmod(path.dirname(file), 0o755)
  await fs.writeFile(file, '{}', { mode: 0o644 })
  t.equal(await writeStoredLogin(env, LOGIN), file)
  t.equal((await fs.stat(path.dirname(file))).mode & 0o777, 0o700, 'the folder is tightened to 0700')
  t.equal((await fs.stat(file)).mode & 0o777, 0o600, 'the file is 0600')
  t.same(await readStoredLogin(env), LOGIN)
})

t.test('a symlink planted where the temporary file would go is not written through', async (t) => {
  const dir = await tempDir(t, 'reaktor-cred-')
  const env = { XDG_CONFIG_HOME: path.join(dir, 'config') }
  const file = credentialsPath(env)
  await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 })
  const victim = path.join(dir, 'victim.txt')
  await fs.writeFile(victim, 'keep me\n')
  await fs.symlink(victim, `${file}.${process.pid}.tmp`)
  await writeStoredLogin(env, LOGIN)
  t.equal(await fs.readFile(victim, 'utf8'), 'keep me\n', 'the file the symlink names is untouched')
  t.same(await readStoredLogin(env), LOGIN)
  t.same((await fs.readdir(path.dirname(file))).sort(), ['credentials.json', `credentials.json.${process.pid}.tmp`], 'no temporary file left behind')
})

t.test('a folder or a file of another user is neither written into nor believed', async (t) => {
  const env = { XDG_CONFIG_HOME: await tempDir(t, 'reaktor-cred-') }
  const file = credentialsPath(env)
  const folder = path.dirname(file)
  await fs.mkdir(folder, { mode: 0o777 })
  await fs.chmod(folder, 0o777)
  // Theirs, naming their service: the next login would send it the password.
  await fs.writeFile(file, JSON.stringify({ ...LOGIN, url: 'http://evil.example' }), { mode: 0o644 })
  await fs.chown(file, OTHER_UID, OTHER_UID)
  await t.rejects(readStoredLogin(env), { message: /belongs to another user/ }, 'their file is refused')

  await fs.chown(folder, OTHER_UID, OTHER_UID)
  await t.rejects(writeStoredLogin(env, LOGIN), { message: /belongs to another user/ }, 'their folder is not written into')
  t.same(await fs.readdir(folder), ['credentials.json'], 'nothing written there')
  t.match(await fs.readFile(file, 'utf8'), 'evil.example', 'their file as it was')
})

t.test('a relative XDG_CONFIG_HOME is ignored: the token never lands under the current folder', async (t) => {
  const home = await tempDir(t, 'reaktor-cred-')
  for (const relative of ['.', 'config', './x/..']) {
    t.equal(credentialsPath({ XDG_CONFIG_HOME: relative, HOME: home }), path.join(home, '.config', 'reaktor', 'credentials.json'), JSON.stringify(relative))
  }
  t.equal(credentialsPath({ XDG_CONFIG_HOME: '/srv/conf', HOME: home }), '/srv/conf/reaktor/credentials.json', 'an absolute one is used')
  t.equal(credentialsPath({ XDG_CONFIG_HOME: '', HOME: home }), path.join(home, '.config', 'reaktor', 'credentials.json'), 'an empty one is unset')
})
