import path from 'node:path'

/** `file` as the user would type it from here: relative to the working folder when inside it (`reaktor-apps/x/index.js`), else absolute. */
export function shownPath (file: string): string {
  const relative = path.relative(process.cwd(), file)
  return relative === '' || relative.startsWith('..') || path.isAbsolute(relative) ? file : relative
}
