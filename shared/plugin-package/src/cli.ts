/**
 * `svc-plugin`: the plugin author's command line.
 *
 *   svc-plugin validate --plugin <dir>
 *   svc-plugin sign     --plugin <dir> --key <private-key.pem> [--out <plugin.signature.json>]
 *   svc-plugin verify   --plugin <dir|.tgz|.zip> --trusted <public-key.pem> [--trusted …] [--allow-unsigned]
 *   svc-plugin pack     --plugin <dir> [--out <file.tgz>]
 *   svc-plugin help | --help, svc-plugin <command> --help
 *
 * `validate` applies the install-time rules of registry.json that do not depend on the host it goes to,
 * and lists every rule broken. `sign` does the same first (a package install would refuse is not signed),
 * then hashes every file of the package but plugin.signature.json, takes pluginId and version from
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
import { validateRegistry } from "./registry.js";
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

async function registryOf(dir: string): Promise<{ pluginId: string; version: string; raw: unknown }> {
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
  return { pluginId: registry.pluginId, version: registry.version, raw: registry };
}

/**
 * registry.json checked as the host checks it at install, but for what depends on the host (its version,
 * the plugins installed there): a PackageError listing every rule broken.
 */
async function validated(dir: string): Promise<{ pluginId: string; version: string }> {
  const found = await registryOf(dir);
  // One line per field: the schema may say twice what is wrong with one (missing, then not a string).
  const violations = validateRegistry(found.raw, {}).filter(
    (v, i, all) => all.findIndex((w) => w.field === v.field) === i,
  );
  if (violations.length > 0) {
    throw new PackageError(
      `registry.json breaks ${violations.length} rule${violations.length === 1 ? "" : "s"}:\n${violations
        .map((v) => `  ${v.field.replace(/^\/registry\.json\/?/, "") || "(root)"}: ${v.message}`)
        .join("\n")}`,
      "registry.json",
    );
  }
  return found;
}

async function validate(values: { plugin?: string }): Promise<string> {
  if (values.plugin === undefined) throw new UsageError("validate needs --plugin");
  const { pluginId, version } = await validated(resolve(values.plugin));
  return `valid: ${pluginId} ${version} (registry.json keeps every rule an install applies, but the host's version and installed plugins)`;
}

async function sign(values: { plugin?: string; key?: string; out?: string }): Promise<string> {
  if (values.plugin === undefined || values.key === undefined)
    throw new UsageError("sign needs --plugin and --key");
  const dir = resolve(values.plugin);
  const { pluginId, version } = await validated(dir);
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

const USAGE: Record<string, string> = {
  validate:
    "svc-plugin validate --plugin <dir>\n    checks registry.json as an install would, listing every rule broken",
  sign: "svc-plugin sign --plugin <dir> --key <private-key.pem> [--out <file>]\n    validates, then writes plugin.signature.json (ECDSA P-256, the key in PEM)",
  verify:
    "svc-plugin verify --plugin <dir|.tgz|.zip> --trusted <public-key.pem>... [--allow-unsigned]\n    checks the files and the signature as the host does",
  pack: "svc-plugin pack --plugin <dir> [--out <file.tgz>]\n    writes the package as a .tgz to install",
};
const usage = (command?: string) =>
  command !== undefined && USAGE[command] !== undefined
    ? `usage: ${USAGE[command]}\n`
    : `usage:\n${Object.values(USAGE)
        .map((u) => `  ${u.replaceAll("\n", "\n  ")}`)
        .join("\n")}\n  svc-plugin help | <command> --help\n`;

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === "help" || command === "--help" || command === "-h") {
    process.stdout.write(usage(rest[0]));
    return command === undefined ? 2 : 0;
  }
  try {
    const { values } = parseArgs({
      args: rest,
      options: {
        plugin: { type: "string" },
        key: { type: "string" },
        out: { type: "string" },
        trusted: { type: "string", multiple: true },
        "allow-unsigned": { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    });
    const run = { validate, sign, verify, pack }[command];
    if (run === undefined) throw new UsageError(`unknown command '${command}'`);
    if (values.help === true) {
      process.stdout.write(usage(command));
      return 0;
    }
    process.stdout.write(`${await run(values)}\n`);
    return 0;
  } catch (error) {
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
      process.stderr.write(`svc-plugin: ${(error as Error).message}\n${usage(command)}`);
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
