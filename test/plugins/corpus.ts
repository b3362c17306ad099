/**
 * The corpus of plugin packages the tests install: a good package (directory, .tgz, .zip, DER and P1363
 * signatures) and one fixture per hostile case, each built here from scratch with a key pair made for the
 * run. `buildCorpus(dir)` writes them and returns where each is, with the trusted key.
 */
import { execFileSync } from "node:child_process";
import { createPrivateKey, generateKeyPairSync, type KeyObject, sign } from "node:crypto";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import { canonicalBytes, hashDirectory, type SignatureManifest, signManifest } from "@svc/plugin-package";
import { create as createTar } from "tar";
import yazl from "yazl";

export interface Corpus {
  readonly trustedPem: string;
  readonly trustedKey: KeyObject;
  readonly otherPem: string;
  readonly signerFingerprint: string;
  /** Directory packages. */
  readonly dirs: Record<
    "good" | "p1363" | "tampered" | "injected" | "missing" | "untrusted" | "unsigned",
    string
  >;
  /** Archive packages: path to the bytes. */
  readonly archives: Record<
    "goodTgz" | "goodZip" | "zipSlip" | "tarAbsolute" | "tarSymlink" | "tarDotDot" | "zipBomb" | "zipSymlink",
    string
  >;
  /** The content hash of the good package's entry module (for revoked-content). */
  readonly entryHash: string;
}

function pemPair() {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  return {
    privateKey,
    privatePem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    publicKey,
    publicPem: publicKey.export({ type: "spki", format: "pem" }).toString(),
  };
}

/** A package directory: registry.json, an entry module, a theme and a surface template. */
export function writePlugin(dir: string, pluginId = "hello", version = "1.0.0", padBytes = 0): void {
  mkdirSync(join(dir, "views", "surface"), { recursive: true });
  writeFileSync(
    join(dir, "registry.json"),
    JSON.stringify(
      {
        contractVersion: "1.0",
        schemaVersion: "1.0",
        name: "Hello",
        pluginId,
        version,
        assemblyFileName: "index.mjs",
        entryTypeName: "HelloPlugin",
        tier: "application",
        permissions: [`${pluginId}.greeting.read`],
        sensitiveFields: ["greeting"],
      },
      null,
      2,
    ),
  );
  writeFileSync(join(dir, "index.mjs"), "export class HelloPlugin {}\n");
  writeFileSync(join(dir, "theme.json"), JSON.stringify({ surface: "workspace", definitions: [] }));
  writeFileSync(join(dir, "views", "surface", "index.njk"), "<h1>Hello, {{ workspaceKey }}</h1>\n");
  if (padBytes > 0) writeFileSync(join(dir, "assets.bin"), Buffer.alloc(padBytes, 7));
}

async function signDir(dir: string, key: KeyObject): Promise<SignatureManifest> {
  const registry = JSON.parse(readFileSync(join(dir, "registry.json"), "utf8")) as {
    pluginId: string;
    version: string;
  };
  const manifest = signManifest({ ...registry, files: await hashDirectory(dir) }, key);
  writeFileSync(join(dir, "plugin.signature.json"), JSON.stringify(manifest, null, 2));
  return manifest;
}

function zipOf(entries: Array<{ name: string; data: Buffer; mode?: number }>): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  for (const e of entries) zip.addBuffer(e.data, e.name, e.mode === undefined ? {} : { mode: e.mode });
  zip.end();
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    zip.outputStream.on("data", (c: Buffer) => chunks.push(c));
    zip.outputStream.on("end", () => resolve(Buffer.concat(chunks)));
    zip.outputStream.on("error", reject);
  });
}

export async function buildCorpus(root: string): Promise<Corpus> {
  mkdirSync(root, { recursive: true });
  const trusted = pemPair();
  const other = pemPair();
  writeFileSync(join(root, "trusted.pub.pem"), trusted.publicPem);
  writeFileSync(join(root, "trusted.pem"), trusted.privatePem);
  writeFileSync(join(root, "other.pub.pem"), other.publicPem);
  const dir = (name: string) => join(root, name);

  writePlugin(dir("good"));
  const manifest = await signDir(dir("good"), trusted.privateKey);

  writePlugin(dir("p1363"));
  const p = await signDir(dir("p1363"), trusted.privateKey);
  const r = sign("sha256", canonicalBytes(p), { key: trusted.privateKey, dsaEncoding: "ieee-p1363" });
  writeFileSync(
    join(dir("p1363"), "plugin.signature.json"),
    JSON.stringify({ ...p, signature: r.toString("base64") }),
  );

  writePlugin(dir("tampered"));
  await signDir(dir("tampered"), trusted.privateKey);
  writeFileSync(join(dir("tampered"), "index.mjs"), "export class HelloPlugin { evil = true }\n");

  writePlugin(dir("injected"));
  await signDir(dir("injected"), trusted.privateKey);
  writeFileSync(join(dir("injected"), "payload.mjs"), "process.exit(1)\n");

  writePlugin(dir("missing"));
  await signDir(dir("missing"), trusted.privateKey);
  execFileSync("rm", [join(dir("missing"), "theme.json")]);

  writePlugin(dir("untrusted"));
  await signDir(dir("untrusted"), other.privateKey);

  writePlugin(dir("unsigned"));

  // Archives of the good package, and hostile ones.
  const files = [...manifest.files.map((f) => f.path), "plugin.signature.json"];
  const goodTgz = join(root, "good.tgz");
  await createTar({ gzip: true, cwd: dir("good"), file: goodTgz, portable: true }, files);
  const goodZip = join(root, "good.zip");
  writeFileSync(
    goodZip,
    await zipOf(files.map((f) => ({ name: f, data: readFileSync(join(dir("good"), f)) }))),
  );

  // zip-slip: a name with `../`, made by patching a same-length name in both headers.
  const slip = await zipOf([{ name: "aa/evil.mjs", data: Buffer.from("1") }]);
  const zipSlip = join(root, "zip-slip.zip");
  writeFileSync(
    zipSlip,
    Buffer.from(slip.toString("latin1").replaceAll("aa/evil.mjs", "../evil.mjs"), "latin1"),
  );

  // A zip entry that is a symbolic link (S_IFLNK in the external attributes).
  const zipSymlink = join(root, "zip-symlink.zip");
  writeFileSync(
    zipSymlink,
    await zipOf([{ name: "link", data: Buffer.from("/etc/passwd"), mode: 0o120777 }]),
  );

  // A zip bomb: 64 MiB of zeros, a few hundred KiB compressed.
  const zipBomb = join(root, "zip-bomb.zip");
  writeFileSync(zipBomb, await zipOf([{ name: "zeros.bin", data: Buffer.alloc(64 * 1024 * 1024) }]));

  // tar entries with an absolute path, a `..` path and a symbolic link out of the package.
  const hostile = dir("hostile-src");
  mkdirSync(join(hostile, "inner"), { recursive: true });
  writeFileSync(join(hostile, "x.txt"), "x");
  symlinkSync("/etc/passwd", join(hostile, "out"));
  const tarAbsolute = join(root, "absolute.tgz");
  await createTar({ gzip: true, file: tarAbsolute, preservePaths: true }, [join(hostile, "x.txt")]);
  const tarDotDot = join(root, "dotdot.tgz");
  await createTar({ gzip: true, cwd: join(hostile, "inner"), file: tarDotDot, preservePaths: true }, [
    "../x.txt",
  ]);
  const tarSymlink = join(root, "symlink.tgz");
  await createTar({ gzip: true, cwd: hostile, file: tarSymlink, portable: true }, ["out", "x.txt"]);

  return {
    trustedPem: join(root, "trusted.pub.pem"),
    trustedKey: createPrivateKey(trusted.privatePem),
    otherPem: join(root, "other.pub.pem"),
    signerFingerprint: manifest.signerFingerprint,
    dirs: {
      good: dir("good"),
      p1363: dir("p1363"),
      tampered: dir("tampered"),
      injected: dir("injected"),
      missing: dir("missing"),
      untrusted: dir("untrusted"),
      unsigned: dir("unsigned"),
    },
    archives: { goodTgz, goodZip, zipSlip, tarAbsolute, tarSymlink, tarDotDot, zipBomb, zipSymlink },
    entryHash: manifest.files.find((f) => f.path === "index.mjs")?.sha256 as string,
  };
}
