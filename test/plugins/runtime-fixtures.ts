/**
 * Plugins written for the runtime tests: a package per behaviour (one that throws, loops, exhausts its
 * heap, exits, crashes later), signed with a key made for the run, packed as .tgz in memory.
 */
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

import { hashDirectory, packDirectory, signManifest } from "@svc/plugin-package";

import { devSignerEnv } from "../../scripts/lib/example-plugin.js";

export interface FixtureSigner {
  readonly privateKey: KeyObject;
  readonly publicPem: string;
}

export function fixtureSigner(): FixtureSigner {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  return { privateKey, publicPem: publicKey.export({ type: "spki", format: "pem" }).toString() };
}

/**
 * The environment of a test stack that installs plugins: no API rate limit, a request deadline long
 * enough for installs, the extraction cache under `work`, and the signers trusted: the development signer
 * (examples/plugins) first when `dev` is set, then the test signer.
 */
export function pluginStackEnv(
  work: string,
  trust: { readonly dev?: boolean; readonly tests?: FixtureSigner },
): Record<string, string> {
  const env: Record<string, string> = {
    BackendHost__RateLimitApiPerMinute: "0",
    BackendHost__RequestTimeoutMs: "20000",
    BackendHost__PluginCacheDir: join(work, "cache"),
    ...(trust.dev === true ? devSignerEnv() : {}),
  };
  if (trust.tests !== undefined) {
    const index = trust.dev === true ? 1 : 0;
    env[`BackendHost__TrustedSigners__${index}__PublisherId`] = "tests";
    env[`BackendHost__TrustedSigners__${index}__PublicKey`] = trust.tests.publicPem;
  }
  return env;
}

export interface FixtureRoute {
  readonly method: string;
  readonly path: string;
  readonly handler: string;
  readonly permission?: string;
}

/** A signed package whose entry module is `code` (it must export `Plugin`), plus `files`, as .tgz bytes. */
export async function codePlugin(
  work: string,
  signer: FixtureSigner,
  pluginId: string,
  code: string,
  routes: readonly FixtureRoute[],
  extra: Record<string, unknown> = {},
  files: Record<string, string> = {},
): Promise<Buffer> {
  const dir = join(work, `${pluginId}-${Math.random().toString(36).slice(2, 8)}`);
  mkdirSync(dir, { recursive: true });
  const registry = {
    contractVersion: "1.0",
    schemaVersion: "1.0",
    name: pluginId,
    pluginId,
    version: "1.0.0",
    assemblyFileName: "main.mjs",
    entryTypeName: "Plugin",
    routes,
    ...extra,
  };
  writeFileSync(join(dir, "registry.json"), JSON.stringify(registry, null, 2));
  writeFileSync(join(dir, "main.mjs"), code);
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), content);
  }
  const manifest = signManifest(
    { pluginId, version: registry.version, files: await hashDirectory(dir) },
    signer.privateKey,
  );
  writeFileSync(join(dir, "plugin.signature.json"), JSON.stringify(manifest, null, 2));
  return (await packDirectory(dir)).bytes;
}

/** One plugin with a route per way of misbehaving. */
export const MISBEHAVING = `
export class Plugin {
  ok() { return { fine: true }; }
  throws() { throw new Error("secret detail from the plugin"); }
  spin() { for (;;) {} }
  hog() { const keep = []; for (;;) keep.push(new Array(1e6).fill(Math.random())); }
  grow() { const one = []; for (let i = 0; i < 1e9; i++) one.push(i); }
  exit() { process.exit(3); }
  later() { setTimeout(() => { throw new Error("thrown from a timer"); }, 10); return { scheduled: true }; }
}
`;

export const MISBEHAVING_ROUTES: FixtureRoute[] = [
  { method: "GET", path: "/ok", handler: "ok" },
  { method: "GET", path: "/throws", handler: "throws" },
  { method: "GET", path: "/spin", handler: "spin" },
  { method: "GET", path: "/hog", handler: "hog" },
  { method: "GET", path: "/grow", handler: "grow" },
  { method: "GET", path: "/exit", handler: "exit" },
  { method: "GET", path: "/later", handler: "later" },
];
