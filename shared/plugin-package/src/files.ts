/**
 * The files of a plugin package directory, hashed: only regular files, no links or devices, no path that
 * leaves the root, within limits. `plugin.signature.json` itself is never listed.
 */
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { lstat, readdir } from "node:fs/promises";
import { join, relative, sep } from "node:path";

import { byPath, type FileEntry, SIGNATURE_FILE } from "./manifest.js";

export interface PackageLimits {
  /** Most files a package may hold. */
  readonly maxFiles: number;
  /** Most bytes all its files may hold together. */
  readonly maxBytes: number;
}

export const DEFAULT_LIMITS: PackageLimits = { maxFiles: 2_000, maxBytes: 50 * 1024 * 1024 };

/** Why a package's files were refused; `path` names the file. */
export class PackageError extends Error {
  override readonly name = "PackageError";
  constructor(
    message: string,
    readonly path?: string,
  ) {
    super(message);
  }
}

function sha256Of(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = createHash("sha256");
    createReadStream(path)
      .on("data", (chunk) => hash.update(chunk))
      .on("error", reject)
      .on("end", () => resolve(hash.digest("hex")));
  });
}

/**
 * Every file under `root` but the signature manifest, sorted by path: its `/`-separated path and where it
 * is. Refuses links, devices and other special files, and more files or bytes than the limits allow.
 */
export async function listPackageFiles(
  root: string,
  limits: PackageLimits = DEFAULT_LIMITS,
): Promise<Array<{ path: string; full: string }>> {
  const rootStat = await lstat(root).catch(() => undefined);
  if (rootStat === undefined || !rootStat.isDirectory()) {
    throw new PackageError(`'${root}' is not a readable directory.`);
  }
  const out: Array<{ path: string; full: string }> = [];
  let bytes = 0;
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const full = join(dir, entry.name);
      const path = relative(root, full).split(sep).join("/");
      if (entry.isSymbolicLink()) throw new PackageError("Links are not allowed in a plugin package.", path);
      if (entry.isDirectory()) {
        await walk(full);
        continue;
      }
      if (!entry.isFile())
        throw new PackageError("Only regular files are allowed in a plugin package.", path);
      if (path === SIGNATURE_FILE) continue;
      const stat = await lstat(full);
      if (stat.nlink > 1) throw new PackageError("Hard links are not allowed in a plugin package.", path);
      bytes += stat.size;
      if (out.length + 1 > limits.maxFiles) {
        throw new PackageError(`The package holds more than ${limits.maxFiles} files.`);
      }
      if (bytes > limits.maxBytes)
        throw new PackageError(`The package holds more than ${limits.maxBytes} bytes.`);
      out.push({ path, full });
    }
  };
  await walk(root);
  return out.sort(byPath);
}

/** Every file under `root` (but the signature manifest), with its SHA-256, sorted by path. */
export async function hashDirectory(
  root: string,
  limits: PackageLimits = DEFAULT_LIMITS,
): Promise<FileEntry[]> {
  const out: FileEntry[] = [];
  for (const file of await listPackageFiles(root, limits)) {
    out.push({ path: file.path, sha256: await sha256Of(file.full) });
  }
  return out;
}
