/**
 * `reaktor apps publish`: the package it sends. A .tgz is sent as it is; a folder is packed by npm
 * itself (`npm pack`, the very tarball `npm publish` would send, its `files` and `.npmignore` and
 * `prepack` script applied) into a temporary folder, removed after.
 */
import { spawn } from 'node:child_process'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { CliError, EXIT, type CliIo } from './context.js'

/** How much of npm's output a failed pack quotes: its end, where npm says what went wrong. */
const QUOTED_OUTPUT_CHARS = 4000

export interface PackageSource {
  /** The package as `npm pack` wrote it. */
  bytes: Buffer<ArrayBuffer>
  /** What it was read from, for messages: the file, or the folder it was packed from. */
  from: string
}

/** The package of `source` (a folder, or a file such as my-app-1.2.0.tgz), relative to the current folder. */
export async function readPackageSource (io: CliIo, source: string): Promise<PackageSource> {
  const resolved = path.resolve(source)
  const stat = await fs.stat(resolved).catch(() => undefined)
  if (stat === undefined) throw new CliError(EXIT.notFound, `${resolved} does not exist: give an app folder (with a package.json) or a .tgz that npm pack wrote`)
  if (stat.isFile()) return { bytes: await fs.readFile(resolved), from: resolved }
  if (!stat.isDirectory()) throw new CliError(EXIT.usage, `${resolved} is neither a folder nor a file: give an app folder (with a package.json) or a .tgz that npm pack wrote`)
  const hasManifest = await fs.stat(path.join(resolved, 'package.json')).then((s) => s.isFile(), () => false)
  if (!hasManifest) throw new CliError(EXIT.usage, `${resolved} is not an app folder (no package.json): give an app folder or a .tgz that npm pack wrote`)
  return { bytes: await packFolder(io, resolved), from: resolved }
}

/** `npm pack` of `dir` into a folder of its own, read and removed: the app folder is left as it was. */
async function packFolder (io: CliIo, dir: string): Promise<Buffer<ArrayBuffer>> {
  const destination = await fs.mkdtemp(path.join(os.tmpdir(), 'reaktor-pack-'))
  try {
    await runNpmPack(io, dir, destination)
    // The folder is new and npm writes one file into it: whatever its name (a scoped app's is
    // acme-widgets-1.0.0.tgz), the .tgz there is the package.
    const written = (await fs.readdir(destination)).filter((name) => name.endsWith('.tgz'))
    if (written.length !== 1) throw new CliError(EXIT.error, `npm pack in ${dir} wrote ${written.length} .tgz files, not one: pack the app yourself (npm pack) and publish the .tgz`)
    return await fs.readFile(path.join(destination, written[0]))
  } finally {
    await fs.rm(destination, { recursive: true, force: true })
  }
}

async function runNpmPack (io: CliIo, dir: string, destination: string): Promise<void> {
  // Its output is kept, and shown only when it fails: stdout may be this command's --json answer.
  const child = spawn('npm', ['pack', '--pack-destination', destination], { cwd: dir, env: io.env, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  const keep = (text: string): void => { output = (output + text).slice(-QUOTED_OUTPUT_CHARS) }
  child.stdout.setEncoding('utf8').on('data', keep)
  child.stderr.setEncoding('utf8').on('data', keep)
  const { code, signal } = await new Promise<{ code: number | null, signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code, signal) => resolve({ code, signal }))
  }).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') throw new CliError(EXIT.error, `cannot pack ${dir}: npm is not on PATH; install npm, or pack the app elsewhere (npm pack) and publish the .tgz`)
    throw new CliError(EXIT.error, `cannot run npm pack in ${dir}: ${err.message}`)
  })
  if (code === 0) return
  const how = signal === null ? `exited with code ${code}` : `was ended by ${signal}`
  throw new CliError(EXIT.error, `npm pack in ${dir} ${how}; nothing was published. Its output:\n${output.trimEnd()}`)
}
