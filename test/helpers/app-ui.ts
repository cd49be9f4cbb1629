import http from 'node:http'
import fs from 'node:fs/promises'
import path from 'node:path'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { SESSION_COOKIE } from '../../src/auth/types.js'
import type { AppDefinition } from '../../src/apps/types.js'
import { tempDir } from './temp-dir.js'
import type { TestContext } from './test-context.js'

export type Files = Record<string, string | Buffer>

/** Writes `files` (paths relative to the app folder) into a fresh temporary app folder. */
export async function writeApp (t: TestContext, name: string, version: string, files: Files): Promise<AppDefinition> {
  const dir = await tempDir(t, 'reaktor-app-')
  await fs.mkdir(path.join(dir, 'public'), { recursive: true })
  for (const [file, content] of Object.entries(files)) {
    const full = path.join(dir, file)
    await fs.mkdir(path.dirname(full), { recursive: true })
    await fs.writeFile(full, content)
  }
  await fs.writeFile(path.join(dir, 'package.json'), JSON.stringify({ name, version }))
  return { name, version, dir, publicDir: path.join(dir, 'public') }
}

/** GET (or another method) with the session cookie. */
export async function browse (app: FastifyInstance, url: string, token: string | undefined, headers: Record<string, string> = {}, method: 'GET' | 'HEAD' = 'GET'): Promise<LightMyRequestResponse> {
  return await app.inject({
    method,
    url,
    headers: { ...(token === undefined ? {} : { cookie: `${SESSION_COOKIE}=${token}` }), ...headers }
  })
}

export interface RawResponse { statusCode: number, headers: http.IncomingHttpHeaders, body: string }

/**
 * A request over a real socket with the path sent exactly as given. `app.inject` (like browsers
 * and most clients) resolves `.`/`..` and `%2e` segments before sending, which would hide exactly
 * the inputs a traversal test needs to deliver.
 */
export async function rawRequest (origin: string, rawPath: string, headers: Record<string, string> = {}, method = 'GET'): Promise<RawResponse> {
  const { hostname, port } = new URL(origin)
  return await new Promise((resolve, reject) => {
    const req = http.request({ host: hostname, port, path: rawPath, method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => resolve({ statusCode: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end()
  })
}
