/**
 * Verification of a plugin package directory against its signed manifest: every file's hash
 * recomputed, no file outside the manifest and none missing, no revoked signer or content, the signer
 * resolved by fingerprint among the trusted ones, the signature verified. Used by the CLI, at install and
 * whenever a stored plugin is loaded again.
 */
import { type KeyObject } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";

import { DEFAULT_LIMITS, hashDirectory, PackageError, type PackageLimits } from "./files.js";
import {
  ALGORITHM,
  fingerprintOf,
  SIGNATURE_FILE,
  type SignatureManifest,
  signatureMistake,
  verifyManifestSignature,
} from "./manifest.js";

/** Why a package failed verification: a stable code and a sentence naming what was found. */
export interface VerificationFailure {
  readonly code:
    | "unreadable"
    | "unsigned"
    | "manifest-invalid"
    | "file-missing"
    | "file-not-in-manifest"
    | "hash-mismatch"
    | "duplicate-path"
    | "registry-mismatch"
    | "revoked-signer"
    | "revoked-content"
    | "untrusted-signer"
    | "bad-signature";
  readonly reason: string;
  readonly path?: string;
}

export interface TrustedSigner {
  readonly publisherId: string;
  readonly displayName: string;
  readonly publicKey: KeyObject;
}

/** Each trusted key's fingerprint, worked out once per key object (every verification compares them). */
const fingerprints = new WeakMap<KeyObject, string>();
function fingerprintOnce(key: KeyObject): string {
  let found = fingerprints.get(key);
  if (found === undefined) {
    found = fingerprintOf(key);
    fingerprints.set(key, found);
  }
  return found;
}

export interface VerifyOptions {
  readonly trusted: readonly TrustedSigner[];
  readonly revokedSignerFingerprints?: readonly string[];
  readonly revokedContentHashes?: readonly string[];
  /** An unsigned package passes (development only; the caller decides). */
  readonly allowUnsigned?: boolean;
  readonly limits?: PackageLimits;
}

export type VerificationResult =
  | {
      readonly ok: true;
      readonly signed: boolean;
      readonly manifest?: SignatureManifest;
      readonly signer?: TrustedSigner;
    }
  | ({ readonly ok: false } & VerificationFailure);

const HEX64 = /^[0-9a-f]{64}$/;

function parseManifest(text: string): SignatureManifest | string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return "is not valid JSON";
  }
  const m = value as Partial<Record<keyof SignatureManifest, unknown>>;
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "is not a JSON object";
  for (const field of ["schemaVersion", "pluginId", "version", "algorithm", "signerFingerprint"] as const) {
    if (typeof m[field] !== "string" || m[field].length === 0) return `has no ${field}`;
  }
  if (m.algorithm !== ALGORITHM) return `names algorithm '${String(m.algorithm)}', not ${ALGORITHM}`;
  if (!HEX64.test(m.signerFingerprint as string))
    return "has a signerFingerprint that is not 64 lower-case hex digits";
  if (!Array.isArray(m.files)) return "has no files array";
  for (const f of m.files as unknown[]) {
    const e = f as { path?: unknown; sha256?: unknown };
    if (typeof e?.path !== "string" || typeof e.sha256 !== "string" || !HEX64.test(e.sha256)) {
      return "has a files entry that is not {path, sha256 (64 lower-case hex digits)}";
    }
  }
  if (m.signature !== undefined && typeof m.signature !== "string")
    return "has a signature that is not a string";
  return value as SignatureManifest;
}

function revokedContentFailure(path: string): VerificationResult {
  return { ok: false, code: "revoked-content", reason: "A file's content hash is revoked.", path };
}

/** Verifies the package directory `root`. Never throws for a bad package: the result says why. */
export async function verifyPackage(root: string, options: VerifyOptions): Promise<VerificationResult> {
  let files;
  try {
    files = await hashDirectory(root, options.limits ?? DEFAULT_LIMITS);
  } catch (error) {
    if (error instanceof PackageError)
      return { ok: false, code: "unreadable", reason: error.message, path: error.path };
    throw error;
  }
  // A revoked file is refused whether or not the package is signed.
  const revokedContent = new Set(options.revokedContentHashes ?? []);
  const revokedFile = files.find((f) => revokedContent.has(f.sha256));
  const text = await readFile(join(root, SIGNATURE_FILE), "utf8").catch(() => undefined);
  if (text === undefined) {
    if (options.allowUnsigned === true && revokedFile !== undefined)
      return revokedContentFailure(revokedFile.path);
    return options.allowUnsigned === true
      ? { ok: true, signed: false }
      : { ok: false, code: "unsigned", reason: `The package has no ${SIGNATURE_FILE}: it is not signed.` };
  }
  const manifest = parseManifest(text);
  if (typeof manifest === "string") {
    return { ok: false, code: "manifest-invalid", reason: `${SIGNATURE_FILE} ${manifest}.` };
  }
  const listed = new Map<string, string>();
  for (const entry of manifest.files) {
    if (listed.has(entry.path)) {
      return {
        ok: false,
        code: "duplicate-path",
        reason: "The manifest lists a path twice.",
        path: entry.path,
      };
    }
    listed.set(entry.path, entry.sha256);
  }
  const present = new Map(files.map((f) => [f.path, f.sha256]));
  for (const [path, sha256] of present) {
    const expected = listed.get(path);
    if (expected === undefined) {
      return {
        ok: false,
        code: "file-not-in-manifest",
        reason: "A file is not listed in the signed manifest.",
        path,
      };
    }
    if (expected !== sha256) {
      return {
        ok: false,
        code: "hash-mismatch",
        reason: "A file's content differs from what was signed.",
        path,
      };
    }
  }
  for (const path of listed.keys()) {
    if (!present.has(path)) {
      return { ok: false, code: "file-missing", reason: "A file the manifest lists is missing.", path };
    }
  }
  const registry = await readFile(join(root, "registry.json"), "utf8")
    .then((t) => JSON.parse(t) as { pluginId?: unknown; version?: unknown })
    .catch(() => undefined);
  if (
    registry !== undefined &&
    (registry.pluginId !== manifest.pluginId || registry.version !== manifest.version)
  ) {
    return {
      ok: false,
      code: "registry-mismatch",
      reason: `The manifest signs ${manifest.pluginId} ${manifest.version}, registry.json says ${String(registry.pluginId)} ${String(registry.version)}.`,
    };
  }
  if (options.revokedSignerFingerprints?.includes(manifest.signerFingerprint)) {
    return {
      ok: false,
      code: "revoked-signer",
      reason: `The signer ${manifest.signerFingerprint} is revoked.`,
    };
  }
  if (revokedFile !== undefined) return revokedContentFailure(revokedFile.path);
  const signer = options.trusted.find((s) => fingerprintOnce(s.publicKey) === manifest.signerFingerprint);
  if (signer === undefined) {
    return {
      ok: false,
      code: "untrusted-signer",
      reason: `The signer ${manifest.signerFingerprint} is not among the trusted signers.`,
    };
  }
  if (!verifyManifestSignature(manifest, signer.publicKey)) {
    const mistake = signatureMistake(manifest, signer.publicKey);
    return {
      ok: false,
      code: "bad-signature",
      reason: `The signature does not verify with the signer's public key.${mistake === undefined ? "" : ` ${mistake}`}`,
    };
  }
  return { ok: true, signed: true, manifest, signer };
}
