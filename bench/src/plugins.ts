/**
 * Plugin lifecycle latency through the running stack: install of a signed 1 MiB package (an
 * incompressible asset, so the upload is 1 MiB too) and its re-verification (the signature report),
 * each repeated; p50 and p95. Target: install p95 under 200 ms.
 *
 * Activation and deactivation latency over 200 cycles (target activation p95 ≤ 75 ms), and a
 * plugin route's throughput next to a core operator route doing the same work (main.ts measures both).
 */
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { hashDirectory, packDirectory, SIGNATURE_FILE, signManifest } from "@svc/plugin-package";

import { percentile, sorted } from "./stats.js";

const signer = generateKeyPairSync("ec", { namedCurve: "prime256v1" });

/** The settings that make the stack's plugin registry trust this benchmark's signer. */
export function benchSignerEnv(): Record<string, string> {
  return {
    BackendHost__TrustedSigners__0__PublisherId: "bench",
    BackendHost__TrustedSigners__0__PublicKey: signer.publicKey
      .export({ type: "spki", format: "pem" })
      .toString(),
  };
}

export async function onePackage(
  bytes: number,
  entry = "export class Bench {}\n",
  routes: unknown[] = [],
  pluginId = "bench",
): Promise<Buffer> {
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-plugin-"));
  try {
    mkdirSync(join(dir, "views", "surface"), { recursive: true });
    writeFileSync(
      join(dir, "registry.json"),
      JSON.stringify({
        contractVersion: "1.0",
        schemaVersion: "1.0",
        name: "Bench",
        pluginId,
        version: "1.0.0",
        assemblyFileName: "index.mjs",
        entryTypeName: "Bench",
        permissions: [`${pluginId}.thing.read`],
        routes,
      }),
    );
    writeFileSync(join(dir, "index.mjs"), entry);
    writeFileSync(join(dir, "views", "surface", "index.njk"), "<p>bench</p>\n");
    writeFileSync(join(dir, "asset.bin"), randomBytes(bytes));
    const files = await hashDirectory(dir);
    writeFileSync(
      join(dir, SIGNATURE_FILE),
      JSON.stringify(signManifest({ pluginId, version: "1.0.0", files }, signer.privateKey)),
    );
    return (await packDirectory(dir)).bytes;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface PluginBenchResult {
  readonly packageBytes: number;
  readonly install: { p50: number; p95: number };
  readonly verify: { p50: number; p95: number };
  readonly rounds: number;
}

export async function runPluginBench(
  gateway: string,
  accessToken: string,
  rounds = 30,
): Promise<PluginBenchResult> {
  const bytes = await onePackage(1024 * 1024);
  const auth = { authorization: `Bearer ${accessToken}` };
  const install: number[] = [];
  const verify: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const t0 = performance.now();
    const installed = await fetch(`${gateway}/api/plugins/install`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/gzip" },
      body: bytes,
    });
    if (installed.status !== 201)
      throw new Error(`install answered ${installed.status}: ${await installed.text()}`);
    install.push(performance.now() - t0);
    const t1 = performance.now();
    const report = await fetch(`${gateway}/api/plugins/signature-report`, { headers: auth });
    if (!report.ok) throw new Error(`signature report answered ${report.status}`);
    await report.arrayBuffer();
    verify.push(performance.now() - t1);
    const removed = await fetch(`${gateway}/api/plugins/bench`, { method: "DELETE", headers: auth });
    if (removed.status !== 204) throw new Error(`uninstall answered ${removed.status}`);
  }
  return {
    packageBytes: bytes.length,
    install: { p50: percentile(sorted(install), 50), p95: percentile(sorted(install), 95) },
    verify: { p50: percentile(sorted(verify), 50), p95: percentile(sorted(verify), 95) },
    rounds,
  };
}

export function printPluginResults(r: PluginBenchResult): void {
  const f = (n: number) => n.toFixed(1);
  console.log(
    `\nPlugin lifecycle through the gateway (${r.rounds} rounds, package ${(r.packageBytes / 1024).toFixed(0)} KiB)`,
  );
  console.log(
    `  install  p50 ${f(r.install.p50)} ms, p95 ${f(r.install.p95)} ms (target p95 < 200 ms: ${r.install.p95 < 200 ? "met" : "NOT met"})`,
  );
  console.log(
    `  verify (signature report, one plugin)  p50 ${f(r.verify.p50)} ms, p95 ${f(r.verify.p95)} ms`,
  );
}

/**
 * The plugin of the activation and route benchmark: one route answering what the core route
 * `GET /api/plugins/contracts/support` answers (a small constant JSON object), so both do the same work
 * behind the same guard; only the hop into the plugin's worker differs.
 */
const ROUTE_PLUGIN = `export class Bench {
  info() {
    return { hostVersion: "0", contractVersion: "1.0", supportedContractVersions: ">=1.0.0 <2.0.0",
             hostDependencyKey: "host", permissionsProperty: "permissions" };
  }
}
`;

/** The route plugin's package (`bench`, route `GET /info` under `bench.thing.read`), signed as benchSignerEnv trusts. */
export function routePluginPackage(): Promise<Buffer> {
  return onePackage(1024, ROUTE_PLUGIN, [
    { method: "GET", path: "/info", permission: "bench.thing.read", handler: "info" },
  ]);
}

export interface ActivationBenchResult {
  readonly cycles: number;
  readonly activate: { p50: number; p95: number };
  readonly deactivate: { p50: number; p95: number };
}

/** Installs the route plugin and runs `cycles` activate/deactivate pairs; leaves it active. */
export async function runActivationBench(
  gateway: string,
  accessToken: string,
  cycles = 200,
): Promise<ActivationBenchResult> {
  const auth = { authorization: `Bearer ${accessToken}` };
  const bytes = await routePluginPackage();
  const installed = await fetch(`${gateway}/api/plugins/install`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/gzip" },
    body: bytes,
  });
  if (installed.status !== 201)
    throw new Error(`install answered ${installed.status}: ${await installed.text()}`);
  const activate: number[] = [];
  const deactivate: number[] = [];
  const call = async (what: "activate" | "deactivate", into: number[]) => {
    const t0 = performance.now();
    const r = await fetch(`${gateway}/api/plugins/bench/${what}`, { method: "POST", headers: auth });
    if (r.status !== 200) throw new Error(`${what} answered ${r.status}: ${await r.text()}`);
    await r.arrayBuffer();
    into.push(performance.now() - t0);
  };
  for (let i = 0; i < cycles; i++) {
    await call("activate", activate);
    await call("deactivate", deactivate);
  }
  await call("activate", []);
  // The gateway's route table follows the lifecycle broadcast: wait until the route answers.
  for (let i = 0; i < 100; i++) {
    const r = await fetch(`${gateway}/api/plugins/bench/info`, { headers: auth });
    await r.arrayBuffer();
    if (r.status === 200) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const stats = (xs: number[]) => ({ p50: percentile(sorted(xs), 50), p95: percentile(sorted(xs), 95) });
  return { cycles, activate: stats(activate), deactivate: stats(deactivate) };
}

export function printActivationResults(r: ActivationBenchResult): void {
  const f = (n: number) => n.toFixed(1);
  console.log(`\nPlugin activation through the gateway (${r.cycles} activate/deactivate cycles)`);
  console.log(
    `  activate    p50 ${f(r.activate.p50)} ms, p95 ${f(r.activate.p95)} ms (target p95 <= 75 ms: ${r.activate.p95 <= 75 ? "met" : "NOT met"})`,
  );
  console.log(`  deactivate  p50 ${f(r.deactivate.p50)} ms, p95 ${f(r.deactivate.p95)} ms`);
}

/** The three-plugin chain of the render benchmark: alpha's entry extends beta's page, which extends gamma's layout. */
export const RENDER_CHAIN: Record<string, Record<string, string>> = {
  "render-alpha": {
    "index.njk":
      '{% extends "page.njk" %}{% block content %}<h1>{{ workspace.name }}</h1><p>{{ SurfaceKey }} {{ Locale }} {{ tokens.accent }}</p>{% endblock %}',
  },
  "render-beta": {
    "page.njk":
      '{% extends "layout.njk" %}{% block body %}<main>{% block content %}{% endblock %}</main><footer>{{ snippets.footer }}</footer>{% endblock %}',
  },
  "render-gamma": {
    "layout.njk":
      '<!doctype html><html><head><title>{{ workspace.name }}</title></head><body>{% block body %}{% endblock %}<nav>{% for item in navigation %}<a href="{{ item.fullPath }}">{{ item.title }}</a>{% endfor %}</nav></body></html>',
  },
};

/** Writes the chain's template plugins, signed; returns their directories and .tgz bytes. */
export async function renderPackages(
  root: string,
): Promise<Array<{ pluginId: string; dir: string; bytes: Buffer }>> {
  const out: Array<{ pluginId: string; dir: string; bytes: Buffer }> = [];
  for (const [pluginId, templates] of Object.entries(RENDER_CHAIN)) {
    const dir = join(root, pluginId);
    mkdirSync(join(dir, "views", "surface"), { recursive: true });
    writeFileSync(
      join(dir, "registry.json"),
      JSON.stringify({
        contractVersion: "1.0",
        schemaVersion: "1.0",
        name: pluginId,
        pluginId,
        version: "1.0.0",
        assemblyFileName: "index.mjs",
        entryTypeName: "Plugin",
      }),
    );
    writeFileSync(join(dir, "index.mjs"), "export class Plugin {}\n");
    for (const [name, src] of Object.entries(templates))
      writeFileSync(join(dir, "views", "surface", name), src);
    const files = await hashDirectory(dir);
    writeFileSync(
      join(dir, SIGNATURE_FILE),
      JSON.stringify(signManifest({ pluginId, version: "1.0.0", files }, signer.privateKey)),
    );
    out.push({ pluginId, dir, bytes: (await packDirectory(dir)).bytes });
  }
  return out;
}

/** Installs, activates and entitles the chain, and puts it in the workspace's chain. */
export async function setUpRenderChain(
  gateway: string,
  accessToken: string,
  packages: ReadonlyArray<{ pluginId: string; bytes: Buffer }>,
  tenantKey: string,
  workspaceKey: string,
): Promise<void> {
  const auth = { authorization: `Bearer ${accessToken}` };
  const call = async (method: string, path: string, body?: unknown, contentType = "application/json") => {
    const r = await fetch(`${gateway}${path}`, {
      method,
      headers: { ...auth, ...(body === undefined ? {} : { "content-type": contentType }) },
      body: body === undefined ? undefined : body instanceof Buffer ? body : JSON.stringify(body),
    });
    if (!r.ok) throw new Error(`${method} ${path} answered ${r.status}: ${await r.text()}`);
    await r.arrayBuffer();
  };
  for (const p of packages) {
    await call("POST", "/api/plugins/install", p.bytes, "application/gzip");
    await call("POST", `/api/plugins/${p.pluginId}/activate`);
  }
  await call("PUT", "/api/entitlements", {
    items: packages.map((p) => ({ tenantKey, pluginId: p.pluginId, entitled: true })),
  });
  await call("PUT", `/api/workspaces/${workspaceKey}/plugins`, { chain: packages.map((p) => p.pluginId) });
}
