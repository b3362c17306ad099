/**
 * Unpacking a plugin package archive (`.tgz`, `.tar` or `.zip`) into an empty directory, with the
 * archive libraries' own parsers (node-tar's Parser, yauzl) and every refusal a package must meet:
 * links of any kind, devices and other special entries, absolute paths, `..` segments and backslashes,
 * duplicate paths, more files or bytes than the limits allow. Sizes are counted while inflating: a
 * zip or gzip bomb is stopped at the limit, never after.
 */
import { once } from "node:events";
import { createWriteStream } from "node:fs";
import { lstat, mkdir, readdir, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { promisify } from "node:util";
import { gunzip } from "node:zlib";

import { create as createTar, Parser, type ReadEntry } from "tar";
import yauzl from "yauzl";

import { archiveKind, GZIP } from "./archive-kind.js";
import { DEFAULT_LIMITS, listPackageFiles, PackageError, type PackageLimits } from "./files.js";
import { SIGNATURE_FILE } from "./manifest.js";

const gunzipAsync = promisify(gunzip);

/**
 * The entry's path as the package will hold it, or a refusal naming the entry. Directories end with `/`.
 * A leading `./` is dropped (GNU tar, bsdtar and Python's tarfile write `./name` for `tar czf x.tgz -C dir
 * .`); the root entry those tools write (`.` or `./`) is the empty path, which only a directory may have.
 */
function safePath(raw: string): string {
  let path = raw;
  while (path.startsWith("./")) path = path.slice(2);
  if (path === ".") path = "";
  if (raw.length === 0) throw new PackageError("An entry has an empty path.");
  if (path.length > 1_024) throw new PackageError("An entry has an overlong path.", raw.slice(0, 120));
  if (path.length === 0) return path;
  if (path.startsWith("/") || /^[A-Za-z]:/.test(path)) {
    throw new PackageError("An entry has an absolute path.", raw);
  }
  if (path.includes("\\")) throw new PackageError("An entry's path holds a backslash.", raw);
  // eslint-disable-next-line no-control-regex -- control characters are what is refused
  if (/[\u0000-\u001f]/.test(path)) throw new PackageError("An entry's path holds a control character.", raw);
  const segments = path.replace(/\/$/, "").split("/");
  if (segments.some((s) => s === ".." || s === "." || s === "")) {
    throw new PackageError("An entry's path leaves the package or is not normalised.", raw);
  }
  return path;
}

/** Counts files and bytes against the limits, refusing duplicates. */
class Budget {
  private files = 0;
  private bytes = 0;
  private readonly seen = new Set<string>();
  constructor(private readonly limits: PackageLimits) {}

  file(path: string): void {
    if (this.seen.has(path)) throw new PackageError("The archive holds a path twice.", path);
    this.seen.add(path);
    if (++this.files > this.limits.maxFiles) {
      throw new PackageError(`The package holds more than ${this.limits.maxFiles} files.`);
    }
  }

  /** A stream step that counts the bytes going through and fails past the limit. */
  counter(path: string): Transform {
    return new Transform({
      transform: (chunk: Buffer, _encoding, done) => {
        this.bytes += chunk.length;
        if (this.bytes > this.limits.maxBytes) {
          done(new PackageError(`The package expands to more than ${this.limits.maxBytes} bytes.`, path));
        } else done(null, chunk);
      },
    });
  }
}

async function writeEntry(dest: string, path: string, source: NodeJS.ReadableStream, budget: Budget) {
  const target = join(dest, path);
  await mkdir(dirname(target), { recursive: true });
  await pipeline(source, budget.counter(path), createWriteStream(target, { flags: "wx", mode: 0o644 }));
}

const FILE_TYPES = new Set(["File", "OldFile", "ContiguousFile"]);

/** The tar stream's own bytes per file beyond its content: a 512-byte header, padding, long-name headers. */
const TAR_OVERHEAD_PER_FILE = 3 * 512;

/**
 * A gzip-compressed tar inflated first, in one step that stops at the most a package within the limits
 * can take (its bytes, the tar headers of its files and the end blocks): a gzip bomb costs at most that
 * much memory and time, never the whole bomb. The parser reads plain tar only.
 */
async function inflateTar(bytes: Buffer, limits: PackageLimits): Promise<Buffer> {
  if (!bytes.subarray(0, 2).equals(GZIP)) return bytes;
  const most = limits.maxBytes + (limits.maxFiles + 2) * TAR_OVERHEAD_PER_FILE + 10 * 512;
  try {
    return await gunzipAsync(bytes, { maxOutputLength: most });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ERR_BUFFER_TOO_LARGE") {
      throw new PackageError(`The package expands to more than ${limits.maxBytes} bytes.`);
    }
    throw new PackageError(`The archive is not a valid gzip: ${(error as Error).message}`);
  }
}

async function extractTar(archive: Buffer, dest: string, limits: PackageLimits): Promise<void> {
  const bytes = await inflateTar(archive, limits);
  const budget = new Budget(limits);
  const parser = new Parser({ strict: true });
  const writes: Array<Promise<void>> = [];
  let failure: unknown;
  const fail = (error: unknown) => {
    failure ??= error;
    parser.abort(error instanceof Error ? error : new Error(String(error)));
  };
  parser.on("entry", (entry: ReadEntry) => {
    try {
      const path = safePath(entry.path);
      if (path === "" && entry.type !== "Directory")
        throw new PackageError("An entry has an empty path.", entry.path);
      if (entry.type === "Directory") {
        entry.resume();
        return;
      }
      if (!FILE_TYPES.has(entry.type)) {
        throw new PackageError(
          `A ${entry.type} entry is not allowed in a plugin package (regular files and directories only).`,
          entry.path,
        );
      }
      if (entry.size > limits.maxBytes) {
        throw new PackageError(`The package expands to more than ${limits.maxBytes} bytes.`, entry.path);
      }
      budget.file(path);
      writes.push(writeEntry(dest, path, entry as unknown as NodeJS.ReadableStream, budget).catch(fail));
    } catch (error) {
      entry.resume();
      fail(error);
    }
  });
  parser.on("warn", (code: string, message: string | Error) => {
    // strict: every warning (a bad header, a bad checksum, a truncated archive) refuses the package.
    fail(new PackageError(`The archive is not a valid tar: ${code}: ${String(message)}`));
  });
  const done = Promise.race([once(parser, "end"), once(parser, "abort"), once(parser, "close")]);
  parser.on("error", fail);
  try {
    await pipeline(Readable.from([bytes]), parser as unknown as NodeJS.WritableStream);
  } catch (error) {
    fail(error);
  }
  await done.catch(() => undefined);
  await Promise.allSettled(writes);
  if (failure !== undefined) {
    throw failure instanceof PackageError
      ? failure
      : new PackageError(`The archive is not a valid tar: ${(failure as Error).message}`);
  }
}

/** Unix mode of a zip entry (symbolic links carry S_IFLNK there). */
const unixMode = (entry: yauzl.Entry) => (entry.externalFileAttributes >>> 16) & 0o170000;

async function extractZip(bytes: Buffer, dest: string, limits: PackageLimits): Promise<void> {
  const budget = new Budget(limits);
  let zip: yauzl.ZipFile;
  try {
    zip = await yauzl.fromBufferPromise(bytes, { strictFileNames: true, validateEntrySizes: true });
  } catch (error) {
    throw new PackageError(`The archive is not a valid zip: ${(error as Error).message}`);
  }
  try {
    for await (const entry of zip.eachEntry()) {
      const path = safePath(entry.fileName);
      const mode = unixMode(entry);
      if (path === "" && !entry.fileName.endsWith("/"))
        throw new PackageError("An entry has an empty path.", entry.fileName);
      if (path === "" || path.endsWith("/")) continue;
      if (mode !== 0 && mode !== 0o100000) {
        throw new PackageError(
          "Links and special files are not allowed in a plugin package.",
          entry.fileName,
        );
      }
      if (entry.isEncrypted()) throw new PackageError("Encrypted entries are not allowed.", entry.fileName);
      if (entry.uncompressedSize > limits.maxBytes) {
        throw new PackageError(`The package expands to more than ${limits.maxBytes} bytes.`, entry.fileName);
      }
      budget.file(path);
      const stream = await zip.openReadStreamPromise(entry);
      await writeEntry(dest, path, stream, budget);
    }
  } catch (error) {
    if (error instanceof PackageError) throw error;
    throw new PackageError(`The archive is not a valid zip: ${(error as Error).message}`);
  } finally {
    zip.close();
  }
}

/** Unpacks `bytes` into the empty directory `dest`; a PackageError says why an archive was refused. */
export async function extractArchive(bytes: Buffer, dest: string, limits: PackageLimits): Promise<void> {
  const kind = archiveKind(bytes);
  if (kind === undefined) throw new PackageError("The upload is not a .tgz, .tar or .zip archive.");
  await mkdir(dest, { recursive: true });
  if (kind === "zip") await extractZip(bytes, dest, limits);
  else await extractTar(bytes, dest, limits);
}

/**
 * A package directory as a .tgz: every file the package holds (links, devices and sizes past the limits
 * refused) and its signature manifest when it has one.
 */
export async function packDirectory(
  dir: string,
  limits: PackageLimits = DEFAULT_LIMITS,
): Promise<{ bytes: Buffer; files: number; signed: boolean }> {
  const files = (await listPackageFiles(dir, limits)).map((f) => f.path);
  const signed = await lstat(join(dir, SIGNATURE_FILE)).then(
    (s) => s.isFile(),
    () => false,
  );
  if (signed) files.push(SIGNATURE_FILE);
  const chunks: Buffer[] = [];
  for await (const chunk of createTar({ gzip: true, cwd: dir, portable: true, noDirRecurse: true }, files)) {
    chunks.push(chunk);
  }
  return { bytes: Buffer.concat(chunks), files: files.length, signed };
}

/**
 * An unpacked package's root: `dir`, or its only entry when that is a folder, whatever its name: an
 * npm-style tarball's `package/`, or the folder a person archived (`tar czf hello.tgz hello`,
 * `zip -r hello.zip hello`).
 */
export async function packageRoot(dir: string): Promise<string> {
  const entries = await readdir(dir);
  const only = entries.length === 1 ? join(dir, entries[0] as string) : undefined;
  return only !== undefined && (await stat(only)).isDirectory() ? only : dir;
}
