import fs from 'node:fs/promises'
import path from 'node:path'

/**
 * The files under `dir` (paths relative to it) that are an app's own: node_modules and dot-folders
 * are not entered at all, as node --test and the loader pass them over (a dependency tree can hold
 * more files than the app itself by far).
 */
export async function ownFiles (dir: string, prefix = ''): Promise<string[]> {
  const entries = await fs.readdir(path.join(dir, prefix), { withFileTypes: true }).catch(() => [])
  const files: string[] = []
  for (const entry of entries) {
    const relative = path.join(prefix, entry.name)
    if (entry.isDirectory()) {
      if (entry.name !== 'node_modules' && !entry.name.startsWith('.')) files.push(...await ownFiles(dir, relative))
    } else if (entry.isFile()) {
      files.push(relative)
    }
  }
  return files
}
