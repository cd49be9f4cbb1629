import fs from 'node:fs/promises'
import path from 'node:path'

/**
 * The files under `dir` (paths relative to it) that are an app's own: node_modules and dot-folders
 * are not entered at all, as node --test and the loader pass them over (a dependency tree can hold
 * more files than the app itself by far); nor are the folders of `dir` itself named in `skip`.
 */
export async function ownFiles (dir: string, skip: readonly string[] = []): Promise<string[]> {
  const walk = async (prefix: string): Promise<string[]> => {
    const entries = await fs.readdir(path.join(dir, prefix), { withFileTypes: true }).catch(() => [])
    const files: string[] = []
    for (const entry of entries) {
      const relative = path.join(prefix, entry.name)
      if (entry.isDirectory()) {
        const skipped = entry.name === 'node_modules' || entry.name.startsWith('.') || (prefix === '' && skip.includes(entry.name))
        if (!skipped) files.push(...await walk(relative))
      } else if (entry.isFile()) {
        files.push(relative)
      }
    }
    return files
  }
  return await walk('')
}
