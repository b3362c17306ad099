/**
 * Plugin package archives are unpacked with the archive libraries and every refusal a
 * package must meet (the corpus of test/plugins/corpus.ts): zip-slip, absolute paths, links in tar and zip,
 * a zip bomb stopped at the size limit; the good package unpacks from .tgz and .zip and verifies.
 */
import { execFileSync } from "node:child_process";
import { createPublicKey } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { DEFAULT_LIMITS, extractArchive, PackageError, verifyPackage } from "@svc/plugin-package";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { buildCorpus, type Corpus } from "./plugins/corpus.js";

const work = mkdtempSync(join(tmpdir(), "svc-plugin-archives-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));
let corpus: Corpus;
let n = 0;
beforeAll(async () => {
  corpus = await buildCorpus(join(work, "corpus"));
}, 60_000);

const trusted = () => [
  { publisherId: "acme", displayName: "Acme", publicKey: createPublicKey(readFileSync(corpus.trustedPem)) },
];

async function unpack(archive: string) {
  const dest = join(work, `x-${++n}`);
  await extractArchive(readFileSync(archive), dest, DEFAULT_LIMITS);
  return dest;
}

async function refusal(archive: string): Promise<PackageError> {
  const error = await unpack(archive).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(PackageError);
  return error as PackageError;
}

describe("plugin package archives", () => {
  it("unpacks the good package from .tgz and from .zip, and both verify", async () => {
    for (const archive of [corpus.archives.goodTgz, corpus.archives.goodZip]) {
      const dest = await unpack(archive);
      expect(readdirSync(dest).sort()).toEqual(
        ["index.mjs", "plugin.signature.json", "registry.json", "theme.json", "views"].sort(),
      );
      expect(await verifyPackage(dest, { trusted: trusted() })).toMatchObject({ ok: true, signed: true });
    }
  });

  it("unpacks packages packed the way users pack a folder: GNU tar, bsdtar, Python's tarfile, zip -r", async () => {
    // Each writes a root entry (`.` or `./`) and `./`-prefixed names, or (zip -r .) plain names.
    const dir = corpus.dirs.good;
    const out = join(work, "tools");
    execFileSync("mkdir", ["-p", out]);
    const made = {
      gnuTar: join(out, "gnu.tgz"),
      bsdtar: join(out, "bsd.tgz"),
      tarfile: join(out, "py.tar.gz"),
      zip: join(out, "zip.zip"),
    };
    execFileSync("tar", ["czf", made.gnuTar, "-C", dir, "."]);
    execFileSync("bsdtar", ["-czf", made.bsdtar, "-C", dir, "."]);
    execFileSync("python3", [
      "-c",
      "import sys, tarfile\nwith tarfile.open(sys.argv[1], 'w:gz') as t: t.add(sys.argv[2], arcname='.')",
      made.tarfile,
      dir,
    ]);
    execFileSync("zip", ["-qr", made.zip, "."], { cwd: dir });
    const listed = execFileSync("tar", ["tzf", made.gnuTar], { encoding: "utf8" }).split("\n");
    expect(listed).toContain("./");
    expect(listed).toContain("./registry.json");
    for (const archive of Object.values(made)) {
      const dest = await unpack(archive);
      expect(readdirSync(dest).sort(), archive).toEqual(readdirSync(dir).sort());
      expect(await verifyPackage(dest, { trusted: trusted() }), archive).toMatchObject({
        ok: true,
        signed: true,
      });
    }
    // Still refused with a ./ prefix, and named: a way out, a file with no name.
    execFileSync("python3", [
      "-c",
      "import sys, tarfile\nwith tarfile.open(sys.argv[1], 'w:gz') as t: t.add(sys.argv[2], arcname='./../escape.json')",
      join(out, "dotdot.tgz"),
      join(dir, "registry.json"),
    ]);
    const dotdot = await refusal(join(out, "dotdot.tgz"));
    expect(dotdot.message).toMatch(/leaves the package/);
    expect(dotdot.path).toBe("./../escape.json");
  });

  it("refuses zip-slip, absolute paths and .. in either format", async () => {
    expect((await refusal(corpus.archives.zipSlip)).message).toMatch(/zip|leaves the package/);
    expect((await refusal(corpus.archives.tarAbsolute)).message).toMatch(/absolute path/);
    expect((await refusal(corpus.archives.tarDotDot)).message).toMatch(/leaves the package/);
  });

  it("refuses links in tar and zip", async () => {
    expect((await refusal(corpus.archives.tarSymlink)).message).toMatch(/SymbolicLink entry is not allowed/);
    expect((await refusal(corpus.archives.zipSymlink)).message).toMatch(/Links and special files/);
  });

  it("stops a gzip bomb made by GNU tar at the size limit, with bounded memory", async () => {
    // 400 MiB of zeros in a .tgz of well under 1 MiB, made by the tools users have.
    const dir = join(work, "gzip-bomb");
    execFileSync("mkdir", ["-p", dir]);
    execFileSync(
      "sh",
      ["-c", "head -c 400M /dev/zero > zeros.bin && tar -czf bomb.tgz zeros.bin && rm zeros.bin"],
      {
        cwd: dir,
      },
    );
    const bomb = readFileSync(join(dir, "bomb.tgz"));
    expect(bomb.length).toBeLessThan(1024 * 1024);
    const before = process.memoryUsage().rss;
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
    const error = await extractArchive(bomb, join(work, "bomb-out"), DEFAULT_LIMITS).catch((e: unknown) => e);
    clearInterval(sampler);
    peak = Math.max(peak, process.memoryUsage().rss);
    expect(error).toBeInstanceOf(PackageError);
    expect((error as Error).message).toMatch(/more than 52428800 bytes/);
    // Inflating stops at what a package within the limits can take (50 MiB and its tar headers).
    const grownMb = (peak - before) / 2 ** 20;
    console.warn(`gzip bomb: refused; resident memory grew by ${grownMb.toFixed(1)} MiB`);
    expect(grownMb).toBeLessThan(160);
  }, 60_000);

  it("stops a zip bomb at the size limit, and refuses what is no archive", async () => {
    expect((await refusal(corpus.archives.zipBomb)).message).toMatch(/more than 52428800 bytes/);
    const small = { maxFiles: 3, maxBytes: DEFAULT_LIMITS.maxBytes };
    const error = await extractArchive(readFileSync(corpus.archives.goodTgz), join(work, "few"), small).catch(
      (e: unknown) => e,
    );
    expect((error as Error).message).toMatch(/more than 3 files/);
    expect(
      await extractArchive(Buffer.from("not an archive at all"), join(work, "none"), DEFAULT_LIMITS).catch(
        (e: unknown) => (e as Error).message,
      ),
    ).toMatch(/not a .tgz, .tar or .zip/);
  });
});
