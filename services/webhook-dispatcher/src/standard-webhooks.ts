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
import { createHmac } from "node:crypto";

import type { Violation } from "@svc/errors";

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

/** The HMAC key of the Standard Webhooks signature. */
export function signingKey(secret: string): Buffer {
  return secret.startsWith(WHSEC_PREFIX)
    ? Buffer.from(secret.slice(WHSEC_PREFIX.length), "base64")
    : Buffer.from(secret, "utf8");
}

/** `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`. */
export function standardSignature(
  secret: string,
  id: string,
  timestampSeconds: number,
  body: Buffer,
): string {
  const mac = createHmac("sha256", signingKey(secret))
    .update(`${id}.${timestampSeconds}.`)
    .update(body)
    .digest("base64");
  return `v1,${mac}`;
}
