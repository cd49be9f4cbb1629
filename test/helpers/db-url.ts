/** The same server, another database. */
export function databaseUrlFor (url: string, database: string): string {
  const u = new URL(url)
  u.pathname = `/${encodeURIComponent(database)}`
  return u.toString()
}
