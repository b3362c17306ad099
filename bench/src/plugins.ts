/**
 * Plugin lifecycle latency through the running stack (issue 11): install of a signed 1 MiB package (an
 * incompressible asset, so the upload is 1 MiB too) and its re-verification (the signature report),
 * each repeated; p50 and p95. Target: install p95 under 200 ms.
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

async function onePackage(bytes: number): Promise<Buffer> {
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-plugin-"));
  try {
    mkdirSync(join(dir, "views", "surface"), { recursive: true });
    writeFileSync(
      join(dir, "registry.json"),
      JSON.stringify({
        contractVersion: "1.0",
        schemaVersion: "1.0",
        name: "Bench",
        pluginId: "bench",
        version: "1.0.0",
        assemblyFileName: "index.mjs",
        entryTypeName: "Bench",
        permissions: ["bench.thing.read"],
      }),
    );
    writeFileSync(join(dir, "index.mjs"), "export class Bench {}\n");
    writeFileSync(join(dir, "views", "surface", "index.njk"), "<p>bench</p>\n");
    writeFileSync(join(dir, "asset.bin"), randomBytes(bytes));
    const files = await hashDirectory(dir);
    writeFileSync(
      join(dir, SIGNATURE_FILE),
      JSON.stringify(signManifest({ pluginId: "bench", version: "1.0.0", files }, signer.privateKey)),
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
