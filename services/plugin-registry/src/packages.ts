/**
 * Opening a plugin package for install or for a later load: its bytes from the package object store,
 * unpacked into a private temporary directory, verified (spec 5.7) and its registry.json validated.
 * Every refusal is a 422 `SVC_PLUGIN_REFUSED` naming the reason; the directory is removed afterwards.
 */
import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import type { BackendHostSettings } from "@svc/config";
import { ErrorCode, SvcError } from "@svc/errors";
import {
  extractArchive,
  PackageError,
  type RegistryJson,
  type SignatureManifest,
  type TrustedSigner,
  validateRegistry,
  verifyPackage,
} from "@svc/plugin-package";
import type { PackageStore } from "@svc/plugin-package/store";

export function refused(reason: string, detail: string, extra: Record<string, unknown> = {}): SvcError {
  return new SvcError(ErrorCode.PluginRefused, detail, { extensions: { reason, ...extra } });
}

/** A stored package's bytes; a 422 when none are stored under that hash. */
export async function storedPackage(store: PackageStore, sha256: string): Promise<Buffer> {
  const bytes = await store.get(sha256);
  if (bytes === null) throw refused("package-missing", `No uploaded package has the hash ${sha256}.`);
  return bytes;
}

export interface OpenedPackage {
  readonly registry: RegistryJson;
  readonly signed: boolean;
  readonly manifest?: SignatureManifest;
  readonly signer?: TrustedSigner & { readonly fingerprint?: string };
}

export interface OpenOptions {
  readonly settings: BackendHostSettings;
  readonly hostVersion: string;
  /** Installed plugins by id → version (dependency ranges); none when re-verifying. */
  readonly installed?: ReadonlyMap<string, string>;
  /** Skip registry.json's install-time rules (a stored plugin re-verified: only trust is checked). */
  readonly trustOnly?: boolean;
}

/** Unpacks, verifies and validates `bytes`; throws a 422 naming the first refusal. */
export async function openPackage(bytes: Buffer, options: OpenOptions): Promise<OpenedPackage> {
  const s = options.settings;
  const dir = await mkdtemp(join(tmpdir(), "svc-plugin-"));
  try {
    try {
      await extractArchive(bytes, dir, { maxFiles: s.pluginMaxFiles, maxBytes: s.pluginMaxExpandedBytes });
    } catch (error) {
      if (error instanceof PackageError) {
        throw refused("archive", error.message, error.path === undefined ? {} : { path: error.path });
      }
      throw error;
    }
    // An npm-style tarball holds the package in `package/`.
    const entries = await readdir(dir);
    const root =
      entries.length === 1 && entries[0] === "package" && (await stat(join(dir, "package"))).isDirectory()
        ? join(dir, "package")
        : dir;
    const result = await verifyPackage(root, {
      trusted: s.trustedSigners,
      revokedSignerFingerprints: s.revokedSignerFingerprints,
      revokedContentHashes: s.revokedContentHashes,
      allowUnsigned: s.allowUnsignedPlugins,
      limits: { maxFiles: s.pluginMaxFiles, maxBytes: s.pluginMaxExpandedBytes },
    });
    if (!result.ok) {
      throw refused(result.code, result.reason, result.path === undefined ? {} : { path: result.path });
    }
    let raw: unknown;
    try {
      raw = JSON.parse(await readFile(join(root, "registry.json"), "utf8"));
    } catch {
      throw refused("registry-invalid", "The package has no readable registry.json at its root.", {
        path: "registry.json",
      });
    }
    if (options.trustOnly !== true) {
      const errors = validateRegistry(raw, {
        hostVersion: options.hostVersion,
        installed: options.installed ?? new Map(),
      });
      if (errors.length > 0) {
        throw refused(
          "registry-invalid",
          `registry.json breaks ${errors.length} rule(s): ${errors.map((e) => `${e.field} ${e.message}`).join("; ")}`,
          { errors },
        );
      }
    }
    return {
      registry: raw as RegistryJson,
      signed: result.signed,
      ...(result.manifest ? { manifest: result.manifest } : {}),
      ...(result.signer ? { signer: result.signer } : {}),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
