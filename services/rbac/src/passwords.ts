import { randomBytes, scrypt, timingSafeEqual } from "node:crypto";

/**
 * Passwords are stored with scrypt (memory-hard, in Node's crypto; no native add-on), r=8, p=1 and
 * N=2^cost: the default cost 15 takes 32 MiB and some tens of milliseconds per hash. Format:
 * `scrypt$N$r$p$salt$hash` (base64url), so the cost can be raised later and old hashes still verify with
 * their own parameters.
 */
export const DEFAULT_PASSWORD_COST = 15;
const R = 8;
const P = 1;
const KEY_LENGTH = 32;

function derive(password: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password, salt, KEY_LENGTH, { N: n, r, p, maxmem: 256 * n * r + 1024 * 1024 }, (err, key) =>
      err ? reject(err) : resolve(key),
    );
  });
}

/** A new password's hash at `cost` (log2 of scrypt's N). */
export async function hashPassword(password: string, cost = DEFAULT_PASSWORD_COST): Promise<string> {
  const n = 2 ** cost;
  const salt = randomBytes(16);
  const key = await derive(password, salt, n, R, P);
  return `scrypt$${n}$${R}$${P}$${salt.toString("base64url")}$${key.toString("base64url")}`;
}

/** Whether `password` is the one `stored` was made from, with the parameters `stored` names. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split("$");
  if (scheme !== "scrypt" || !n || !r || !p || !salt || !hash) return false;
  const expected = Buffer.from(hash, "base64url");
  const key = await derive(password, Buffer.from(salt, "base64url"), Number(n), Number(r), Number(p));
  return key.length === expected.length && timingSafeEqual(key, expected);
}

/** Hashing new passwords at one cost (the setting), and a decoy hash made at that cost. */
export interface Passwords {
  hash(password: string): Promise<string>;
  /**
   * Whether `stored` was made with the parameters new hashes get: false for a hash made before the cost
   * setting changed, which sign-in then replaces (the password is known there).
   */
  current(stored: string): boolean;
  /**
   * A hash of a random password, verified against when the user does not exist, so timing does not tell
   * which part of a sign-in was wrong. Made once.
   */
  decoy(): Promise<string>;
}

export function passwords(cost: number): Passwords {
  let decoy: Promise<string> | undefined;
  const parameters = `scrypt$${2 ** cost}$${R}$${P}$`;
  return {
    hash: (password) => hashPassword(password, cost),
    current: (stored) => stored.startsWith(parameters),
    decoy: () => (decoy ??= hashPassword(randomBytes(16).toString("hex"), cost)),
  };
}
