/**
 * The files of a plugin package directory, hashed: only regular files, no links or devices, no path that
 * leaves the root, within limits. `plugin.signature.json` itself is never listed.
 */
import { createHash } from "node:crypto";
import { createReadStream, type Stats } from "node:fs";
import { lstat, readdir, readFile } from "node:fs/promises";
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

/** Files up to this size are read in one call; larger ones are streamed through the hash. */
const READ_WHOLE_BYTES = 1024 * 1024;
/** Files hashed at once (each read is a trip to libuv's thread pool). */
const HASHING_AT_ONCE = 8;

async function sha256Of(path: string, size: number): Promise<string> {
  if (size <= READ_WHOLE_BYTES)
    return createHash("sha256")
      .update(await readFile(path))
      .digest("hex");
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
): Promise<Array<{ path: string; full: string; size: number }>> {
  const rootStat = await lstat(root).catch(() => undefined);
  if (rootStat === undefined || !rootStat.isDirectory()) {
    throw new PackageError(`'${root}' is not a readable directory.`);
  }
  const out: Array<{ path: string; full: string; size: number }> = [];
  let bytes = 0;
  const walk = async (dir: string): Promise<void> => {
    const files: Array<{ path: string; full: string }> = [];
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
      if (out.length + files.length + 1 > limits.maxFiles) {
        throw new PackageError(`The package holds more than ${limits.maxFiles} files.`);
      }
      files.push({ path, full });
    }
    // The directory's files asked at once (each lstat is a trip to libuv's thread pool).
    const stats = await Promise.all(files.map((f) => lstat(f.full)));
    files.forEach((f, i) => {
      const stat = stats[i] as Stats;
      if (stat.nlink > 1) throw new PackageError("Hard links are not allowed in a plugin package.", f.path);
      bytes += stat.size;
      if (bytes > limits.maxBytes)
        throw new PackageError(`The package holds more than ${limits.maxBytes} bytes.`);
      out.push({ ...f, size: stat.size });
    });
  };
  await walk(root);
  return out.sort(byPath);
}

/** Every file under `root` (but the signature manifest), with its SHA-256, sorted by path. */
export async function hashDirectory(
  root: string,
  limits: PackageLimits = DEFAULT_LIMITS,
): Promise<FileEntry[]> {
  const files = await listPackageFiles(root, limits);
  const out: FileEntry[] = [];
  for (let i = 0; i < files.length; i += HASHING_AT_ONCE) {
    const slice = files.slice(i, i + HASHING_AT_ONCE);
    const hashes = await Promise.all(slice.map((f) => sha256Of(f.full, f.size)));
    slice.forEach((f, k) => out.push({ path: f.path, sha256: hashes[k] as string }));
  }
  return out;
}
