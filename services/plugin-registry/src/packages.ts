/**
 * Opening a plugin package for install or for a later load: its bytes from the package object store,
 * unpacked into a private temporary directory, verified and its registry.json validated.
 * Every refusal is a 422 `SVC_PLUGIN_REFUSED` naming the reason; the directory is removed afterwards.
 */
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { ErrorCode, SvcError } from "@svc/errors";
import {
  extractArchive,
  PackageError,
  packageRoot,
  parseTheme,
  PLUGIN_ID_PATTERN,
  type RegistryJson,
  type SignatureManifest,
  type Theme,
  ThemeError,
  type TrustedSigner,
  validateRegistry,
  verifyPackage,
} from "@svc/plugin-package";
import type { PackageStore } from "@svc/plugin-package/store";

import type { PluginRegistryConfig } from "./settings.js";

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
  /** theme.json, parsed leniently; absent when the package has none. */
  readonly theme?: Theme;
  readonly signed: boolean;
  readonly manifest?: SignatureManifest;
  readonly signer?: TrustedSigner & { readonly fingerprint?: string };
}

export interface OpenOptions {
  readonly settings: PluginRegistryConfig["backendHost"];
  readonly hostVersion: string;
  /** Installed plugins by id → version (dependency ranges); none when re-verifying. */
  readonly installed?: ReadonlyMap<string, string>;
  /** Skip registry.json's install-time rules (a stored plugin re-verified: only trust is checked). */
  readonly trustOnly?: boolean;
  /**
   * Told, before any check, which plugin and version the package's registry.json claims to be (unverified):
   * the audit names the plugin of a refused install.
   */
  readonly claimed?: (claim: { id: string; version: string | undefined }) => void;
}

/** The plugin id (and version) a parsed registry.json claims, when it reads as one; nothing is checked. */
function claimOf(raw: unknown): { id: string; version: string | undefined } | undefined {
  if (typeof raw !== "object" || raw === null) return undefined;
  const { pluginId, version } = raw as Record<string, unknown>;
  if (typeof pluginId !== "string" || !new RegExp(PLUGIN_ID_PATTERN).test(pluginId)) return undefined;
  return { id: pluginId, version: typeof version === "string" && version.length <= 64 ? version : undefined };
}

/** Unpacks `bytes` into `dir`; the package root (`packageRoot`). */
export async function unpack(
  bytes: Buffer,
  dir: string,
  s: PluginRegistryConfig["backendHost"],
): Promise<string> {
  try {
    await extractArchive(bytes, dir, { maxFiles: s.pluginMaxFiles, maxBytes: s.pluginMaxExpandedBytes });
  } catch (error) {
    if (error instanceof PackageError) {
      throw refused("archive", error.message, error.path === undefined ? {} : { path: error.path });
    }
    throw error;
  }
  return packageRoot(dir);
}

/** Verifies an unpacked package at `root` and validates its registry.json; a 422 naming the first refusal. */
export async function checkPackage(root: string, options: OpenOptions): Promise<OpenedPackage> {
  // registry.json, read once: its claim before any check, its rules after the signature's.
  let raw: unknown;
  let readable = true;
  try {
    raw = JSON.parse(await readFile(join(root, "registry.json"), "utf8"));
  } catch {
    readable = false;
  }
  const claim = readable ? claimOf(raw) : undefined;
  if (claim !== undefined) options.claimed?.(claim);
  const s = options.settings;
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
  if (!readable) {
    throw refused("registry-invalid", "The package has no readable registry.json at its root.", {
      path: "registry.json",
    });
  }
  if (options.trustOnly !== true) {
    const errors = validateRegistry(raw, {
      hostVersion: options.hostVersion,
      installed: options.installed ?? new Map(),
    });
    // The UI assets it names must be files of the package.
    const ui = errors.length === 0 ? (raw as RegistryJson).uiAssets : undefined;
    for (const [kind, list] of [
      ["entries", ui?.entries ?? []],
      ["styles", ui?.styles ?? []],
    ] as const) {
      for (const [i, asset] of list.entries()) {
        const found = await stat(join(root, asset.path)).catch(() => undefined);
        if (!found?.isFile()) {
          errors.push({
            field: `/registry.json/uiAssets/${kind}/${i}/path`,
            message: `'${asset.path}' is not a file of the package`,
          });
        }
      }
    }
    if (errors.length > 0) {
      throw refused(
        "registry-invalid",
        `registry.json breaks ${errors.length} rule(s): ${errors.map((e) => `${e.field} ${e.message}`).join("; ")}`,
        { errors },
      );
    }
  }
  let theme: Theme | undefined;
  const themeText = await readFile(join(root, "theme.json"), "utf8").catch(() => undefined);
  if (themeText !== undefined) {
    try {
      theme = parseTheme(themeText);
    } catch (error) {
      if (!(error instanceof ThemeError)) throw error;
      throw refused("theme-invalid", error.message, { path: "theme.json" });
    }
  }
  return {
    registry: raw as RegistryJson,
    ...(theme === undefined ? {} : { theme }),
    signed: result.signed,
    ...(result.manifest ? { manifest: result.manifest } : {}),
    ...(result.signer ? { signer: result.signer } : {}),
  };
}

/** Unpacks, verifies and validates `bytes` in a private temporary directory, removed afterwards. */
export async function openPackage(bytes: Buffer, options: OpenOptions): Promise<OpenedPackage> {
  const dir = await mkdtemp(join(tmpdir(), "svc-plugin-"));
  try {
    return await checkPackage(await unpack(bytes, dir, options.settings), options);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
