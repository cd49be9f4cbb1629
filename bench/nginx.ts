/**
 * nginx (Debian's nginx-light, installed by the bench when missing), one worker process, serving a
 * folder of static files: context for the app-UI scenarios, and the trivial server the load
 * generator's own ceiling is measured against (`/tiny`: a 2-byte answer from the configuration).
 * It runs from its own prefix folder (configuration, pid, logs, temp files), on the servers' core
 * (its worker inherits the master's affinity), and is stopped at the end.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import fs from 'node:fs/promises'
import path from 'node:path'
import { freePort } from '../test/helpers/server.js'
import { CORES, ensureCommand, pinned } from './load.js'
import { delay } from './lib.js'

export interface Nginx {
  url: string
  version: string
  stop: () => Promise<void>
}

/** Starts nginx on 127.0.0.1 serving `root` under /static/ with `headers` added to every answer there. */
export async function startNginx (prefix: string, root: string, headers: Record<string, string>): Promise<Nginx> {
  const nginx = ensureCommand('nginx', 'nginx-light')
  const version = (spawnSync(nginx, ['-v'], { encoding: 'utf8' }).stderr.match(/nginx\/(\S+)/)?.[1]) ?? 'unknown'
  await fs.mkdir(prefix, { recursive: true })
  const port = await freePort()
  const quote = (v: string): string => `"${v.replace(/["\\]/g, (c) => `\\${c}`)}"`
  const conf = `
worker_processes 1;
pid ${path.join(prefix, 'nginx.pid')};
error_log ${path.join(prefix, 'error.log')} warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  client_body_temp_path ${path.join(prefix, 'body')};
  proxy_temp_path ${path.join(prefix, 'proxy')};
  fastcgi_temp_path ${path.join(prefix, 'fastcgi')};
  uwsgi_temp_path ${path.join(prefix, 'uwsgi')};
  scgi_temp_path ${path.join(prefix, 'scgi')};
  types { text/html html; text/javascript js; }
  server {
    listen 127.0.0.1:${port};
    location = /tiny { return 200 "ok"; }
    location /static/ {
      alias ${root}/;
${Object.entries(headers).map(([name, value]) => `      add_header ${name} ${quote(value)} always;`).join('\n')}
    }
  }
}
`
  const confPath = path.join(prefix, 'nginx.conf')
  await fs.writeFile(confPath, conf)
  // The worker runs as www-data: it must be able to read the files (the folders above are 0755).
  const [command, args] = pinned(CORES.server, nginx, ['-p', prefix, '-c', confPath, '-g', 'daemon off;'])
  const child: ChildProcess = spawn(command, args, { stdio: ['ignore', 'ignore', 'inherit'] })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const url = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 10_000
  for (;;) {
    const ok = await fetch(`${url}/tiny`).then((r) => r.ok, () => false)
    if (ok) break
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`nginx did not start: ${await fs.readFile(path.join(prefix, 'error.log'), 'utf8').catch(() => '')}`)
    await delay(50)
  }
  return {
    url,
    version,
    stop: async () => {
      if (child.exitCode !== null) return
      child.kill('SIGQUIT')
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
      await exited
      clearTimeout(timer)
    }
  }
}
