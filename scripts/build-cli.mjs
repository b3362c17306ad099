// Bundles the plugin author's CLI, svc-plugin, into one self-contained ES module: every dependency (tar,
// yauzl, the workspace libraries) inside it, nothing to install beside it. `buildCli(file)` writes the
// bundle; `buildCliPackage(dir)` writes the npm package around it (package.json, README.md), ready for
// `npm publish` and `npm pack`. Run alone: `node scripts/build-cli.mjs [--outdir dist/svc-plugin]`.
import { chmodSync, copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));

/** The CLI's bundle at `outfile`, executable. */
export async function buildCli(outfile, buildInfo = { version: pkg.version, commit: null, builtAt: null }) {
  await build({
    entryPoints: [join(root, "shared/plugin-package/src/main.ts")],
    outfile,
    bundle: true,
    platform: "node",
    target: "node22",
    format: "esm",
    legalComments: "linked",
    logLevel: "warning",
    define: { __SVC_BUILD_INFO__: JSON.stringify(buildInfo) },
    // The CommonJS dependencies (yauzl) call require(): an ES module has none of its own.
    banner: {
      js: [
        "#!/usr/bin/env node",
        'import { createRequire as __svcCreateRequire } from "node:module";',
        "const require = __svcCreateRequire(import.meta.url);",
      ].join("\n"),
    },
  });
  chmodSync(outfile, 0o755);
}

/** The npm package `svc-plugin` in `dir`: the bundle, its package.json and README. */
export async function buildCliPackage(dir, buildInfo) {
  mkdirSync(dir, { recursive: true });
  await buildCli(join(dir, "svc-plugin.mjs"), buildInfo);
  copyFileSync(join(root, "shared/plugin-package/README.npm.md"), join(dir, "README.md"));
  const manifest = {
    name: "svc-plugin",
    version: pkg.version,
    description: "Scaffold, validate, sign, pack and develop plugins for the svc workspace platform",
    type: "module",
    bin: { "svc-plugin": "svc-plugin.mjs" },
    files: ["svc-plugin.mjs", "svc-plugin.mjs.LEGAL.txt", "README.md"],
    engines: { node: ">=22" },
    keywords: ["svc", "plugin", "cli"],
    ...(pkg.license === undefined ? {} : { license: pkg.license }),
  };
  writeFileSync(join(dir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf("--outdir");
  const out = at > 0 ? process.argv[at + 1] : "dist/svc-plugin";
  await buildCliPackage(out);
  console.log(`built the svc-plugin package ${pkg.version} into ${out}/`);
}
