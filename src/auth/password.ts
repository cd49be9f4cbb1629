import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto'

/**
 * Password hashing with node:crypto scrypt. The stored form carries its own parameters,
 * `scrypt$N$r$p$salt$hash` (salt and hash base64), so the cost can be raised later without
 * invalidating existing hashes.
 *
 * N=2^15, r=8, p=3 is one of OWASP's recommended scrypt settings: 32 MiB of memory and roughly
 * 150 ms of CPU per hash, which login rate limiting keeps affordable.
 */
export const PASSWORD_PARAMS = { N: 2 ** 15, r: 8, p: 3 } as const

let params: { N: number, r: number, p: number } = PASSWORD_PARAMS

/**
 * For test suites only (the service never calls it): a cheap cost, so that the hundreds of logins
 * of a test run do not spend minutes of CPU hashing. Hashes carry their parameters, so every hash
 * verifies either way; the tests of this module's defaults run without it.
 */
export function lowerPasswordCostForTests (): void {
  params = { N: 2 ** 10, r: 8, p: 1 }
}
const SALT_BYTES = 16
const KEY_BYTES = 32
const PREFIX = 'scrypt'

async function derive (password: string, salt: Buffer, N: number, r: number, p: number, keyLength: number): Promise<Buffer> {
  // scrypt needs 128*N*r bytes; Node's default maxmem (32 MiB) is just too small for N=2^15, r=8.
  const options: ScryptOptions = { N, r, p, maxmem: 128 * N * r + 16 * 1024 * 1024 }
  return await new Promise((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, keyLength, options, (err, key) => err === null ? resolve(key) : reject(err))
  })
}

/** Hashes a password with a fresh random salt. */
export async function hashPassword (password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES)
  const key = await derive(password, salt, params.N, params.r, params.p, KEY_BYTES)
  return [PREFIX, params.N, params.r, params.p, salt.toString('base64'), key.toString('base64')].join('$')
}

interface Parsed { N: number, r: number, p: number, salt: Buffer, key: Buffer }

function parse (encoded: string): Parsed | null {
  const parts = encoded.split('$')
  if (parts.length !== 6 || parts[0] !== PREFIX) return null
  const [N, r, p] = parts.slice(1, 4).map(Number)
  // Bounds keep a corrupt row from turning into a memory bomb.
  const valid = Number.isInteger(N) && N > 1 && N <= 2 ** 20 && (N & (N - 1)) === 0 &&
    Number.isInteger(r) && r >= 1 && r <= 32 && Number.isInteger(p) && p >= 1 && p <= 16
  if (!valid) return null
  const salt = Buffer.from(parts[4], 'base64')
  const key = Buffer.from(parts[5], 'base64')
  // A shortened key would still match (scrypt output is a prefix of a longer one): require the full length.
  if (salt.length < 16 || key.length < KEY_BYTES || key.length > 128) return null
  return { N, r, p, salt, key }
}

/** True when `password` matches `encoded`; the comparison takes constant time. */
export async function verifyPassword (password: string, encoded: string): Promise<boolean> {
  const parsed = parse(encoded)
  if (parsed === null) return false
  const candidate = await derive(password, parsed.salt, parsed.N, parsed.r, parsed.p, parsed.key.length)
  return timingSafeEqual(candidate, parsed.key)
}

let dummyHash: Promise<string> | undefined

/**
 * A hash of a random password with the current parameters. Checking a password against it when
 * the user does not exist makes a failed login cost the same time whether or not the user exists.
 */
export async function dummyPasswordHash (): Promise<string> {
  dummyHash ??= hashPassword(randomBytes(32).toString('base64url'))
  return await dummyHash
}

/** A random password for the first-run admin: 144 bits, URL- and shell-safe. */
export function randomPassword (): string {
  return randomBytes(18).toString('base64url')
}
