import path from 'node:path'

/** Whether `file` is `folder` or lies below it (whole components: `public-old` is not below `public`). */
export function atOrBelow (file: string, folder: string): boolean {
  return file.startsWith(folder) && (file.length === folder.length || file.startsWith(path.sep, folder.length))
}
