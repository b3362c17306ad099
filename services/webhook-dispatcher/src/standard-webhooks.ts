/**
 * Standard Webhooks (the scheme of standard-webhooks/standard-webhooks, spec/standard-webhooks.md, which
 * Svix's and the official `standardwebhooks` libraries verify), sent beside the spec's `X-Svc-*` headers:
 * `webhook-id` (the delivery id, the same on every attempt), `webhook-timestamp` (the attempt's unix
 * seconds) and `webhook-signature`, `v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`.
 *
 * The key: a secret given in the scheme's own form, `whsec_` and the base64 of 24 to 64 random bytes, is
 * those bytes (what the libraries expect by default); any other secret is its UTF-8 bytes (the libraries'
 * "raw" format). `X-Svc-Signature` is keyed by the secret's text either way, as the spec says.
 */
import {
  createHmac,
  createPrivateKey,
  createSecretKey,
  generateKeyPairSync,
  type KeyObject,
  sign,
} from "node:crypto";

import type { Violation } from "@svc/errors";
import { growingLru } from "@svc/runtime";

export const WHSEC_PREFIX = "whsec_";
const MIN_KEY_BYTES = 24;
const MAX_KEY_BYTES = 64;

/** What is wrong with a secret in the `whsec_` form; none for a good one or a secret in another form. */
export function secretViolations(secret: string): Violation[] {
  if (!secret.startsWith(WHSEC_PREFIX)) return [];
  const encoded = secret.slice(WHSEC_PREFIX.length);
  const key = Buffer.from(encoded, "base64");
  if (key.toString("base64") !== encoded || key.length < MIN_KEY_BYTES || key.length > MAX_KEY_BYTES) {
    return [
      {
        field: "/body/secret",
        message: `a whsec_ secret is whsec_ and the padded base64 of ${MIN_KEY_BYTES} to ${MAX_KEY_BYTES} random bytes`,
      },
    ];
  }
  return [];
}

/** `whsec_` secrets' keys, made once: Node's HMAC takes a key object or a string fast, raw bytes ~7x slower. */
const keyObjects = growingLru<string, KeyObject>(1_000);

/**
 * The HMAC key of the Standard Webhooks signature: a `whsec_` secret's base64 bytes, any other secret's
 * text (which Node's HMAC keys by its UTF-8 bytes).
 */
export function signingKey(secret: string): KeyObject | string {
  // A `whsec_` secret stored before such secrets were checked, and not in the form, is keyed as text: its
  // base64 could decode to few bytes, or none.
  if (!secret.startsWith(WHSEC_PREFIX) || secretViolations(secret).length > 0) return secret;
  let key = keyObjects.get(secret);
  if (key === undefined) {
    key = createSecretKey(Buffer.from(secret.slice(WHSEC_PREFIX.length), "base64"));
    keyObjects.set(secret, key);
  }
  return key;
}

/**
 * `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, one per secret, space-separated (during a
 * rotation's overlap a receiver holding either secret verifies it).
 */
export function standardSignature(
  secrets: readonly string[],
  id: string,
  timestampSeconds: number,
  body: Buffer,
): string {
  return secrets
    .map((secret) => {
      const mac = createHmac("sha256", signingKey(secret))
        .update(`${id}.${timestampSeconds}.`)
        .update(body)
        .digest("base64");
      return `v1,${mac}`;
    })
    .join(" ");
}

/** The `whpk_` prefix of an ed25519 public key in the Standard Webhooks form (`whsk_` for the private). */
export const WHPK_PREFIX = "whpk_";

/** A new ed25519 key pair: the private key as PKCS #8 DER in base64 (to seal), the public as `whpk_…`. */
export function ed25519KeyPair(): { privatePkcs8: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  // The raw 32 bytes of the public key are the JWK's `x`.
  const raw = Buffer.from(publicKey.export({ format: "jwk" }).x as string, "base64url");
  return {
    privatePkcs8: privateKey.export({ format: "der", type: "pkcs8" }).toString("base64"),
    publicKey: `${WHPK_PREFIX}${raw.toString("base64")}`,
  };
}

/** Private keys made once from their PKCS #8 text: a delivery signs with one at every attempt. */
const privateKeys = growingLru<string, KeyObject>(1_000);

/** `v1a,<base64 ed25519 signature of "{id}.{timestamp}.{body}">`. */
export function asymmetricSignature(
  privatePkcs8: string,
  id: string,
  timestampSeconds: number,
  body: Buffer,
): string {
  let key = privateKeys.get(privatePkcs8);
  if (key === undefined) {
    key = createPrivateKey({ key: Buffer.from(privatePkcs8, "base64"), format: "der", type: "pkcs8" });
    privateKeys.set(privatePkcs8, key);
  }
  const signed = Buffer.concat([Buffer.from(`${id}.${timestampSeconds}.`), body]);
  return `v1a,${sign(null, signed, key).toString("base64")}`;
}
