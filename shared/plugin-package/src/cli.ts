/**
 * `svc-plugin`: the plugin author's command line.
 *
 *   svc-plugin sign   --plugin <dir> --key <private-key.pem> [--out <plugin.signature.json>]
 *   svc-plugin verify --plugin <dir|.tgz|.zip> --trusted <public-key.pem> [--trusted …] [--allow-unsigned]
 *   svc-plugin pack   --plugin <dir> [--out <file.tgz>]
 *
 * `sign` hashes every file of the package but plugin.signature.json, takes pluginId and version from
 * registry.json, and writes the signed manifest (signature in DER, Base64). Exit status: 0 done, 1 the
 * package or a key was refused (the reason on stderr), 2 bad usage.
 */
import { createPrivateKey, createPublicKey, type KeyObject } from "node:crypto";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";

import { extractArchive, packageRoot, packDirectory } from "./archive.js";
import { DEFAULT_LIMITS, hashDirectory, PackageError } from "./files.js";
import { fingerprintOf, KeyError, SIGNATURE_FILE, signManifest } from "./manifest.js";
import { verifyPackage } from "./verify.js";

class UsageError extends Error {}

async function readKey(path: string, kind: "private" | "public"): Promise<KeyObject> {
  const pem = await readFile(path, "utf8").catch(() => {
    throw new KeyError(`Cannot read the ${kind} key '${path}'.`);
  });
  try {
    return kind === "private" ? createPrivateKey(pem) : createPublicKey(pem);
  } catch {
    throw new KeyError(`'${path}' does not hold a PEM ${kind} key.`);
  }
}

async function registryOf(dir: string): Promise<{ pluginId: string; version: string }> {
  const text = await readFile(join(dir, "registry.json"), "utf8").catch(() => {
    throw new PackageError(`'${dir}' has no readable registry.json.`);
  });
  let registry: { pluginId?: unknown; version?: unknown };
  try {
    registry = JSON.parse(text) as typeof registry;
  } catch {
    throw new PackageError("registry.json is not valid JSON.", "registry.json");
  }
  if (typeof registry.pluginId !== "string" || typeof registry.version !== "string") {
    throw new PackageError("registry.json needs pluginId and version strings.", "registry.json");
  }
  return { pluginId: registry.pluginId, version: registry.version };
}

async function sign(values: { plugin?: string; key?: string; out?: string }): Promise<string> {
  if (values.plugin === undefined || values.key === undefined)
    throw new UsageError("sign needs --plugin and --key");
  const dir = resolve(values.plugin);
  const { pluginId, version } = await registryOf(dir);
  const key = await readKey(values.key, "private");
  const manifest = signManifest({ pluginId, version, files: await hashDirectory(dir) }, key);
  const out = values.out ?? join(dir, SIGNATURE_FILE);
  await writeFile(out, `${JSON.stringify(manifest, null, 2)}\n`);
  return `signed ${pluginId} ${version}: ${manifest.files.length} files, signer ${manifest.signerFingerprint}, written to ${out}`;
}

async function verify(values: {
  plugin?: string;
  trusted?: string[];
  "allow-unsigned"?: boolean;
}): Promise<string> {
  if (values.plugin === undefined) throw new UsageError("verify needs --plugin");
  const trusted = await Promise.all(
    (values.trusted ?? []).map(async (path) => {
      const publicKey = await readKey(path, "public");
      fingerprintOf(publicKey); // P-256 or a clear error
      return { publisherId: path, displayName: path, publicKey };
    }),
  );
  const target = resolve(values.plugin);
  const isArchive = await stat(target).then(
    (s) => s.isFile(),
    () => false,
  );
  // An archive is unpacked (with every archive check) into a temporary directory first.
  const dir = isArchive ? await mkdtemp(join(tmpdir(), "svc-plugin-verify-")) : target;
  let result;
  try {
    if (isArchive) await extractArchive(await readFile(target), dir, DEFAULT_LIMITS);
    result = await verifyPackage(isArchive ? await packageRoot(dir) : dir, {
      trusted,
      allowUnsigned: values["allow-unsigned"] === true,
    });
  } finally {
    if (isArchive) await rm(dir, { recursive: true, force: true });
  }
  if (!result.ok) {
    throw new PackageError(`refused (${result.code}): ${result.reason}`, result.path);
  }
  return result.signed
    ? `verified ${result.manifest?.pluginId} ${result.manifest?.version}: signed by ${result.signer?.displayName} (${result.manifest?.signerFingerprint})`
    : "accepted unsigned (--allow-unsigned)";
}

async function pack(values: { plugin?: string; out?: string }): Promise<string> {
  if (values.plugin === undefined) throw new UsageError("pack needs --plugin");
  const dir = resolve(values.plugin);
  const { pluginId, version } = await registryOf(dir);
  const { bytes, files, signed } = await packDirectory(dir);
  const out = values.out ?? `${pluginId}-${version}.tgz`;
  await writeFile(out, bytes);
  return `packed ${files} files into ${out}${signed ? "" : " (unsigned: run sign first)"}`;
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    const { values } = parseArgs({
      args: rest,
      options: {
        plugin: { type: "string" },
        key: { type: "string" },
        out: { type: "string" },
        trusted: { type: "string", multiple: true },
        "allow-unsigned": { type: "boolean" },
      },
    });
    const run = { sign, verify, pack }[command ?? ""];
    if (run === undefined) throw new UsageError(`unknown command '${command ?? ""}'`);
    process.stdout.write(`${await run(values)}\n`);
    return 0;
  } catch (error) {
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
      process.stderr.write(
        `svc-plugin: ${(error as Error).message}\nusage: svc-plugin sign --plugin <dir> --key <key.pem> [--out <file>]\n` +
          "       svc-plugin verify --plugin <dir|archive> --trusted <pub.pem>... [--allow-unsigned]\n" +
          "       svc-plugin pack --plugin <dir> [--out <file.tgz>]\n",
      );
      return 2;
    }
    if (error instanceof KeyError || error instanceof PackageError) {
      const where = error instanceof PackageError && error.path !== undefined ? ` (${error.path})` : "";
      process.stderr.write(`svc-plugin: ${error.message}${where}\n`);
      return 1;
    }
    throw error;
  }
}
