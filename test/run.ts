/**
 * `npm test` runs this: it provides one PostgreSQL for the whole run (DATABASE_URL when set,
 * otherwise an embedded server in a temporary folder), migrates a template database that every
 * test file clones, then runs tap and passes its exit code on.
 */
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/db/embedded.js'
import { createDatabase } from '../src/db/index.js'
import { migrateToLatest } from '../src/db/migrate.js'
import { databaseUrlFor } from './helpers/database.js'
import { deadline, TIME_SCALE } from './helpers/timing.js'

/** Reads TAP as it streams and keeps each failed assertion with the subtests around it and its YAML diagnostics. */
class FailureList {
  readonly lines: string[] = []
  count = 0
  private rest = ''
  private readonly names: string[] = []
  /** failedInside[d]: a failure was listed inside the subtest that opened at depth d. */
  private readonly failedInside: boolean[] = []
  private yaml: { indent: string, left: number } | undefined

  feed (text: string): void {
    const parts = (this.rest + text).split('\n')
    this.rest = parts.pop() ?? ''
    for (const line of parts) this.line(line)
  }

  end (): void {
    if (this.rest !== '') this.line(this.rest)
    this.rest = ''
  }

  private line (line: string): void {
    if (this.yaml !== undefined) {
      if (line.startsWith(this.yaml.indent) && !line.trimStart().startsWith('...') && this.yaml.left > 0) {
        this.yaml.left--
        if (line.trim() !== '---') this.lines.push(`    ${line.trim()}`)
        return
      }
      this.yaml = undefined
    }
    const subtest = /^(\s*)# Subtest: (.*)$/.exec(line)
    if (subtest !== null) {
      const depth = subtest[1].length / 4
      this.names.length = depth
      this.names[depth] = subtest[2]
      this.failedInside.length = depth
      this.failedInside[depth] = false
      return
    }
    const failed = /^(\s*)not ok \d+ - (.*)$/.exec(line)
    if (failed === null) return
    const depth = failed[1].length / 4
    // A failed subtest's own line repeats the failures already listed inside it.
    if (this.failedInside[depth] === true) return
    for (let d = 0; d < depth; d++) this.failedInside[d] = true
    this.count++
    this.lines.push([...this.names.slice(0, depth), failed[2]].join(' > '))
    this.yaml = { indent: failed[1] + '  ', left: 16 }
  }
}

const log = { info: () => {}, warn: (_o: object, m: string) => console.warn(m) }
let embedded: EmbeddedPostgres | undefined
let tmp: string | undefined
let adminUrl = process.env.DATABASE_URL
if (adminUrl === undefined || adminUrl === '') {
  tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'reaktor-test-'))
  embedded = await startEmbeddedPostgres({ dataDir: tmp, log })
  adminUrl = embedded.adminUrl
}

const template = `reaktor_test_template_${randomBytes(4).toString('hex')}`
const admin = new pg.Client({ connectionString: adminUrl })
await admin.connect()
await admin.query(`create database ${template}`)
const { db } = createDatabase(databaseUrlFor(adminUrl, template), { max: 1, bounded: false })
await migrateToLatest(db)
await db.destroy()

// tap compiles its plugin set (package.json "tap".plugin: tsx instead of its ts-node plugin, and
// no module mocking, whose loader hooks cost each test process half a second of CPU) on first use;
// on a fresh install it would run this first suite with the defaults. Build it now.
const builtTap = path.resolve('node_modules/@tapjs/test/test-built/dist/esm/index.js')
const tapConfig = JSON.parse(readFileSync('package.json', 'utf8')).tap as { plugin: string[], timeout: number }
const leftOut = tapConfig.plugin.filter((p) => p.startsWith('!')).map((p) => p.slice(1))
const built = existsSync(builtTap) ? readFileSync(builtTap, 'utf8') : undefined
if (built === undefined || leftOut.some((plugin) => built.includes(plugin))) {
  spawnSync(path.resolve('node_modules/.bin/tap'), ['build'], { stdio: 'inherit' })
}

// tap's limit per test file grows with the margins of the tests (TEST_TIME_SCALE, helpers/timing.ts);
// a --timeout given on the command line comes after, and wins.
const scaled = TIME_SCALE === 1 ? [] : [`--timeout=${tapConfig.timeout * TIME_SCALE}`]
const tap = spawn(path.resolve('node_modules/.bin/tap'), [...scaled, ...process.argv.slice(2)], {
  stdio: ['inherit', 'pipe', 'inherit'],
  env: { ...process.env, TEST_ADMIN_DATABASE_URL: adminUrl, TEST_TEMPLATE_DATABASE: template, DATABASE_URL: '' }
})
// The output passes through as it comes; the failures are gathered so that they are listed again
// at the very end, where a reader of a long log (or of its last lines only) finds them.
const failures = new FailureList()
// Decoded as a stream: a character split between two chunks arrives whole.
tap.stdout.setEncoding('utf8')
tap.stdout.on('data', (text: string) => {
  process.stdout.write(text)
  failures.feed(text)
})
const ended = new Promise((resolve) => tap.stdout.once('end', resolve))
const code: number = await new Promise((resolve) => tap.on('exit', (c, signal) => resolve(c ?? (signal !== null ? 1 : 0))))
// The last chunks may still be on their way when tap has exited; a process tap left behind that
// holds the pipe open must not hold the run, hence the bound.
let bound: NodeJS.Timeout | undefined
await Promise.race([ended, new Promise((resolve) => { bound = setTimeout(resolve, deadline(5000)) })])
clearTimeout(bound)
failures.end()
if (failures.lines.length > 0) {
  process.stdout.write(`\n# failed (${failures.count}):\n${failures.lines.map((l) => `#   ${l}`).join('\n')}\n`)
}

await admin.query(`drop database if exists ${template} with (force)`).catch(() => {})
await admin.end()
await embedded?.stop()
if (tmp !== undefined) await fs.rm(tmp, { recursive: true, force: true })
process.exit(code)

