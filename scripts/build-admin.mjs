// Builds the admin console (services/gateway/admin/src, docs/adr/0016-admin-console.md) into
// services/gateway/static/admin/assets/ (app.js and app.css, minified), where the gateway serves it at
// /admin/ and `make build` copies it with the other static files. Run alone:
// `node scripts/build-admin.mjs [--outdir <dir>]`. The console is type-checked against the route
// contracts by `tsc -p services/gateway/admin` (make typecheck, make build).
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
export const ADMIN_ASSETS = join(root, "services/gateway/static/admin/assets");

export async function buildAdmin(outdir = ADMIN_ASSETS) {
  await build({
    entryPoints: { app: join(root, "services/gateway/admin/src/main.tsx") },
    outdir,
    bundle: true,
    minify: true,
    format: "esm",
    target: "es2022",
    platform: "browser",
    jsx: "automatic",
    jsxImportSource: "preact",
    legalComments: "none",
    logLevel: "warning",
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf("--outdir");
  await buildAdmin(at > 0 ? process.argv[at + 1] : ADMIN_ASSETS);
  console.log("built the admin console");
}
