/**
 * The rules of usernames and passwords (docs/accounts.md "Users and roles"). The schemas say what JSON Schema
 * can (types, password lengths: src/schemas/users.ts); what it cannot, the username after
 * trimming, is checked here with the same `field: rule` wording as the schema errors.
 */

export const USERNAME_MAX = 64
export const PASSWORD_MIN = 12
export const PASSWORD_MAX = 1024

/**
 * Control, format, unassigned, surrogate and private-use characters, and line and paragraph
 * separators: text that does not show as itself (or at all) in a list of users or a log line,
 * so two names that look the same could be different accounts.
 */
export const UNPRINTABLE_CLASS = '\\p{Cc}\\p{Cf}\\p{Cn}\\p{Cs}\\p{Co}\\p{Zl}\\p{Zp}'
const UNPRINTABLE = new RegExp(`[${UNPRINTABLE_CLASS}]`, 'u')

/** The rule UNPRINTABLE enforces, in the words of the 400 answers. */
export const PRINTABLE_RULE = 'printable characters only (no control, format, unassigned or line-separator characters)'

/** The stored form of a username: what a login, a lookup and a create compare (case aside). */
export function normalizeUsername (raw: string): string {
  return raw.trim()
}

/**
 * What usernames are compared by (stored unique as `users.username_key`): trimmed, composed (NFC),
 * in lower case as JavaScript maps it, so `Émile`, ` émile ` and a decomposed `émile` are one user.
 * Computed here rather than with the database's `lower()`, which folds ASCII only in a C-locale
 * database (the embedded one, and many others).
 */
export function usernameKey (raw: string): string {
  return normalizeUsername(raw).normalize('NFC').toLowerCase()
}

/** The rule a username breaks (after trimming), or null when it is a valid one. */
export function usernameProblem (raw: string): string | null {
  const name = normalizeUsername(raw)
  if (name.length === 0) return 'username: at least 1 character after trimming spaces'
  if ([...name].length > USERNAME_MAX) return `username: at most ${USERNAME_MAX} characters`
  if (UNPRINTABLE.test(name)) return `username: ${PRINTABLE_RULE}`
  // A URL resolves "." and ".." away (encoded too): /users/{username} could never reach the user.
  if (name === '.' || name === '..') return 'username: not "." or "..", which a URL path cannot carry'
  return null
}

/** What is wrong with a new password, or null when it may be set. */
export function passwordProblem (password: string): string | null {
  const characters = [...password].length
  if (characters < PASSWORD_MIN) return `the password is too short: ${characters} characters, at least ${PASSWORD_MIN} are needed`
  if (characters > PASSWORD_MAX) return `the password is too long: ${characters} characters, at most ${PASSWORD_MAX} are allowed`
  return null
}
