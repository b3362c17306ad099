/**
 * The signed content manifest of a plugin package, `plugin.signature.json`, and its
 * signature: ECDSA over P-256 with SHA-256, trust by the signer's public-key fingerprint.
 *
 * Canonical signed bytes: the UTF-8 JSON of the six fields `schemaVersion, pluginId, version, algorithm,
 * signerFingerprint, files` in that order, `files` sorted by path (ordinal, by UTF-16 code unit), each
 * `{path, sha256}`, with no whitespace and non-ASCII characters left as they are (JSON.stringify's
 * escaping: quotes, backslashes and control characters only); `signature` excluded.
 *
 * The signature is Base64 of either encoding a P-256 signature has: DER (what `openssl dgst -sign` and
 * our CLI write) or IEEE P1363 `r||s` (64 bytes, what .NET's `ECDsa.SignData` writes). Both verify.
 */
import { createHash, createPublicKey, type KeyObject, sign, verify } from "node:crypto";

import type { SignatureManifest, SignedFile } from "@svc/plugin-sdk";

export const SIGNATURE_FILE = "plugin.signature.json";
export const ALGORITHM = "ECDSA-P256-SHA256";
export const SIGNATURE_SCHEMA_VERSION = "1.0";

/** A file of the manifest: the plugin SDK's declaration, which plugin authors build against. */
export type FileEntry = SignedFile;
export type { SignatureManifest };

/** A key that cannot sign or verify plugin packages (not EC, or not P-256). */
export class KeyError extends Error {
  override readonly name = "KeyError";
}

/** Ordinal order by path (UTF-16 code units), as the signed bytes sort files. */
export const byPath = (a: { path: string }, b: { path: string }) =>
  a.path < b.path ? -1 : a.path > b.path ? 1 : 0;

/** What is signed, in the canonical member order, with `files` as given. */
function signedFields(manifest: SignatureManifest, files: ReadonlyArray<{ path: string; sha256: string }>) {
  return {
    schemaVersion: manifest.schemaVersion,
    pluginId: manifest.pluginId,
    version: manifest.version,
    algorithm: manifest.algorithm,
    signerFingerprint: manifest.signerFingerprint,
    files,
  };
}

/** The bytes that are signed. */
export function canonicalBytes(manifest: SignatureManifest): Buffer {
  const files = [...manifest.files].sort(byPath).map((f) => ({ path: f.path, sha256: f.sha256 }));
  return Buffer.from(JSON.stringify(signedFields(manifest, files)), "utf8");
}

/** Checks that a key is an EC key on P-256 (a private key's public half is checked the same way). */
export function assertP256(key: KeyObject, what: string): void {
  if (key.asymmetricKeyType !== "ec") {
    throw new KeyError(
      `${what} is a ${key.asymmetricKeyType ?? "symmetric"} key; an EC P-256 key is needed.`,
    );
  }
  const curve = key.asymmetricKeyDetails?.namedCurve;
  if (curve !== "prime256v1") {
    throw new KeyError(`${what} is on curve ${curve ?? "unknown"}; P-256 (prime256v1) is needed.`);
  }
}

/** Lower-case hex SHA-256 of the public key in SubjectPublicKeyInfo DER form. */
export function fingerprintOf(key: KeyObject): string {
  const publicKey = key.type === "private" ? createPublicKey(key) : key;
  assertP256(publicKey, "The key");
  return createHash("sha256")
    .update(publicKey.export({ type: "spki", format: "der" }))
    .digest("hex");
}

/** The manifest of `files`, signed with `privateKey` (the signature in DER, Base64). */
export function signManifest(
  fields: { pluginId: string; version: string; files: readonly FileEntry[] },
  privateKey: KeyObject,
): SignatureManifest {
  if (privateKey.type !== "private") throw new KeyError("The signing key is not a private key.");
  assertP256(privateKey, "The signing key");
  const unsigned: SignatureManifest = {
    schemaVersion: SIGNATURE_SCHEMA_VERSION,
    pluginId: fields.pluginId,
    version: fields.version,
    algorithm: ALGORITHM,
    signerFingerprint: fingerprintOf(privateKey),
    files: [...fields.files].sort(byPath),
  };
  const signature = sign("sha256", canonicalBytes(unsigned), { key: privateKey, dsaEncoding: "der" });
  return { ...unsigned, signature: signature.toString("base64") };
}

/** The manifest's signature as bytes; undefined when it has none, another algorithm, or is not base64. */
function signatureBytes(manifest: SignatureManifest): Buffer | undefined {
  if (manifest.signature === undefined || manifest.algorithm !== ALGORITHM) return undefined;
  const signature = Buffer.from(manifest.signature, "base64");
  if (signature.length === 0 || signature.toString("base64") !== manifest.signature.replace(/\s/g, "")) {
    return undefined;
  }
  return signature;
}

/** True when `signature` over `bytes` verifies with `publicKey`, in DER or in IEEE P1363 form. */
function verifiesOver(bytes: Buffer, signature: Buffer, publicKey: KeyObject): boolean {
  const encodings =
    signature.length === 64 ? (["ieee-p1363", "der"] as const) : (["der", "ieee-p1363"] as const);
  return encodings.some((dsaEncoding) => {
    try {
      return verify("sha256", bytes, { key: publicKey, dsaEncoding }, signature);
    } catch {
      return false;
    }
  });
}

/** True when the manifest's signature verifies with `publicKey`, in DER or in IEEE P1363 form. */
export function verifyManifestSignature(manifest: SignatureManifest, publicKey: KeyObject): boolean {
  const signature = signatureBytes(manifest);
  return signature !== undefined && verifiesOver(canonicalBytes(manifest), signature, publicKey);
}

/** JSON with `item` between members and `key` between a name and its value (Python's default: ", ", ": "). */
function dumps(value: unknown, item: string, key: string): string {
  if (Array.isArray(value)) return `[${value.map((v) => dumps(v, item, key)).join(item)}]`;
  if (typeof value === "object" && value !== null) {
    const members = Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}${key}${dumps(v, item, key)}`);
    return `{${members.join(item)}}`;
  }
  return JSON.stringify(value);
}

/**
 * When a signature does not verify: whether it verifies over the canonical form with one of the usual
 * mistakes of a hand-written signer (files in the order listed rather than sorted by path, members in
 * alphabetical order, spaces after `,` and `:`), and which. Undefined when none of them explains it (a
 * wrong key, changed content).
 */
export function signatureMistake(manifest: SignatureManifest, publicKey: KeyObject): string | undefined {
  const signature = signatureBytes(manifest);
  if (signature === undefined) return undefined;
  const listed = manifest.files.map((f) => ({ path: f.path, sha256: f.sha256 }));
  const sorted = [...listed].sort(byPath);
  for (const files of [sorted, listed]) {
    const inOrder = signedFields(manifest, files);
    const alphabetical = Object.fromEntries(Object.entries(inOrder).sort(([a], [b]) => (a < b ? -1 : 1)));
    for (const members of [inOrder, alphabetical]) {
      for (const spaced of [false, true]) {
        const mistakes = [
          files === listed ? "the files in the order the manifest lists them (sort them by path)" : "",
          members === alphabetical
            ? "the members in alphabetical order (keep schemaVersion, pluginId, version, algorithm, signerFingerprint, files)"
            : "",
          spaced ? "spaces after ',' and ':' (write compact JSON)" : "",
        ].filter((m) => m !== "");
        if (mistakes.length === 0) continue;
        const bytes = Buffer.from(spaced ? dumps(members, ", ", ": ") : JSON.stringify(members), "utf8");
        if (verifiesOver(bytes, signature, publicKey)) {
          return `It verifies over the canonical form written with ${mistakes.join(", and ")}.`;
        }
      }
    }
  }
  return undefined;
}
