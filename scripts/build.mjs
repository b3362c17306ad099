// Bundles each service's entry (services/<name>/src/main.ts) with the workspace libraries into
// dist/<name>.mjs. npm dependencies stay external and are installed in the image with `npm ci --omit=dev`.
import { copyFileSync, cpSync, readFileSync } from "node:fs";
import { build } from "esbuild";

const services = ["gateway", "rbac", "resolver", "plugin-registry", "webhook-dispatcher", "job-reaper"];
const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
const external = [...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.optionalDependencies ?? {})];

const common = {
  bundle: true,
  platform: "node",
  target: "node20",
  format: "esm",
  sourcemap: true,
  external,
  logLevel: "warning",
};

await Promise.all(
  services.map((name) =>
    build({ ...common, entryPoints: [`services/${name}/src/main.ts`], outfile: `dist/${name}.mjs` }),
  ),
);
for (const script of ["migrate", "bootstrap-operator"]) {
  await build({ ...common, entryPoints: [`scripts/${script}.ts`], outfile: `dist/${script}.mjs` });
}
await build({
  ...common,
  entryPoints: ["shared/plugin-package/src/main.ts"],
  outfile: "dist/svc-plugin.mjs",
});
// The plugin runtime's and the surface renderer's workers are loaded by URL next to the registry's bundle
// (plain JavaScript, not bundled).
copyFileSync("services/plugin-registry/src/runtime/plugin-worker.mjs", "dist/plugin-worker.mjs");
copyFileSync("services/plugin-registry/src/runtime/render-worker.mjs", "dist/render-worker.mjs");
// The gateway's static shells (surface-app/, admin/, 404.html), found next to its bundle.
cpSync("services/gateway/static", "dist/static", { recursive: true });
console.log(
  `built ${services.length} services, the migrator, the operator bootstrap and svc-plugin into dist/`,
);
