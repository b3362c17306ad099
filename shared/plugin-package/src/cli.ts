/**
 * `svc-plugin`: the plugin author's command line.
 *
 *   svc-plugin init     <dir> [--id <pluginId>] [--runtime external --language python]
 *   svc-plugin validate --plugin <dir>
 *   svc-plugin sign     --plugin <dir> --key <private-key.pem> [--out <plugin.signature.json>]
 *   svc-plugin verify   --plugin <dir|.tgz|.zip> --trusted <public-key.pem> [--trusted …] [--allow-unsigned]
 *   svc-plugin pack     --plugin <dir> [--out <file.tgz>]
 *   svc-plugin dev      --plugin <dir> [--url <gateway>] [--key <pem>] [--workspace <key>|none]
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
import { registryOf, validated } from "./author.js";
import { runDev } from "./dev.js";
import { DEFAULT_LIMITS, hashDirectory, PackageError } from "./files.js";
import { fingerprintOf, KeyError, SIGNATURE_FILE, signManifest } from "./manifest.js";
import { scaffold } from "./scaffold.js";
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

async function init(
  values: { id?: string; runtime?: string; language?: string },
  dir?: string,
): Promise<string> {
  if (dir === undefined) throw new UsageError("init needs the directory to create");
  const runtime = values.runtime ?? "worker";
  if (runtime !== "worker" && runtime !== "external") throw new UsageError("--runtime is worker or external");
  const language = values.language ?? (runtime === "external" ? "python" : "javascript");
  if (runtime === "worker" && language !== "javascript") {
    throw new UsageError(
      "the platform runs JavaScript entry modules: another language needs --runtime external",
    );
  }
  if (runtime === "external" && language !== "python") {
    throw new UsageError("--runtime external makes a Python backend (--language python)");
  }
  const made = await scaffold(dir, values.id === undefined ? { runtime } : { runtime, pluginId: values.id });
  const test = runtime === "external" ? "python3 -m unittest discover test" : "node --test";
  return [
    `created plugin ${made.pluginId} in ${dir}: ${made.files.join(", ")}`,
    `next: (cd ${dir} && ${test}), then svc-plugin dev --plugin ${dir} with \`make dev\` running`,
  ].join("\n");
}

async function dev(
  values: {
    plugin?: string;
    url?: string;
    key?: string;
    token?: string;
    username?: string;
    password?: string;
    workspace?: string;
  },
  positional?: string,
  signal?: AbortSignal,
): Promise<string> {
  const dir = values.plugin ?? positional;
  if (dir === undefined) throw new UsageError("dev needs --plugin");
  const token = values.token ?? process.env.SVC_TOKEN;
  // Without a token, the demo operator of `make dev`, unless a user is named.
  const username = values.username ?? process.env.SVC_USERNAME ?? (token === undefined ? "admin" : undefined);
  const password =
    values.password ?? process.env.SVC_PASSWORD ?? (token === undefined ? "admin-dev-password" : undefined);
  const workspace = values.workspace ?? "default";
  const stop = signal ?? processSignal();
  await runDev({
    dir: resolve(dir),
    url: values.url ?? process.env.SVC_URL ?? "http://localhost:8080",
    ...(values.key === undefined ? {} : { key: await readKey(values.key, "private") }),
    ...(token === undefined ? {} : { token }),
    ...(username === undefined ? {} : { username }),
    ...(password === undefined ? {} : { password }),
    workspace: workspace === "none" ? null : workspace,
    print: (line) => process.stdout.write(`${line}\n`),
    signal: stop,
  });
  return "stopped";
}

/** Aborted by Ctrl-C or SIGTERM. */
function processSignal(): AbortSignal {
  const controller = new AbortController();
  const stop = () => controller.abort();
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  return controller.signal;
}

const USAGE: Record<string, string> = {
  init: "svc-plugin init <dir> [--id <pluginId>] [--runtime external --language python]\n    writes a new plugin that installs as is: routes, a key, an event, a UI entry, a template, a theme, a test",
  validate:
    "svc-plugin validate --plugin <dir>\n    checks registry.json as an install would, listing every rule broken",
  sign: "svc-plugin sign --plugin <dir> --key <private-key.pem> [--out <file>]\n    validates, then writes plugin.signature.json (ECDSA P-256, the key in PEM)",
  verify:
    "svc-plugin verify --plugin <dir|.tgz|.zip> --trusted <public-key.pem>... [--allow-unsigned]\n    checks the files and the signature as the host does",
  pack: "svc-plugin pack --plugin <dir> [--out <file.tgz>]\n    writes the package as a .tgz to install",
  dev: "svc-plugin dev --plugin <dir> [--url <gateway>] [--key <pem>] [--token <t> | --username <u> --password <p>] [--workspace <key>|none]\n    on every change: signs (the development signer unless --key), packs, installs or updates, activates;\n    defaults: --url http://localhost:8080 (SVC_URL), make dev's demo operator, workspace default",
};
const usage = (command?: string) =>
  command !== undefined && USAGE[command] !== undefined
    ? `usage: ${USAGE[command]}\n`
    : `usage:\n${Object.values(USAGE)
        .map((u) => `  ${u.replaceAll("\n", "\n  ")}`)
        .join("\n")}\n  svc-plugin help | <command> --help\n`;

/** Runs one command; `signal` stops `dev` (else Ctrl-C or SIGTERM does). */
export async function main(argv: string[], options: { signal?: AbortSignal } = {}): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === "help" || command === "--help" || command === "-h") {
    process.stdout.write(usage(rest[0]));
    return command === undefined ? 2 : 0;
  }
  try {
    const { values, positionals } = parseArgs({
      args: rest,
      allowPositionals: true,
      options: {
        plugin: { type: "string" },
        key: { type: "string" },
        out: { type: "string" },
        trusted: { type: "string", multiple: true },
        "allow-unsigned": { type: "boolean" },
        id: { type: "string" },
        runtime: { type: "string" },
        language: { type: "string" },
        url: { type: "string" },
        token: { type: "string" },
        username: { type: "string" },
        password: { type: "string" },
        workspace: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
    const run: Record<string, (v: typeof values, positional?: string) => Promise<string>> = {
      init,
      validate,
      sign,
      verify,
      pack,
      dev: (v, positional) => dev(v, positional, options.signal),
    };
    if (!Object.hasOwn(run, command)) throw new UsageError(`unknown command '${command}'`);
    if (values.help === true) {
      process.stdout.write(usage(command));
      return 0;
    }
    const takesDir = command === "init" || command === "dev";
    if (positionals.length > (takesDir ? 1 : 0)) {
      throw new UsageError(`unexpected argument '${positionals.at(-1)}'`);
    }
    process.stdout.write(`${await run[command]!(values, positionals[0])}\n`);
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
