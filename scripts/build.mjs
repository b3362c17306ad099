// Bundles each service's entry (services/<name>/src/main.ts) with the workspace libraries into
// dist/<name>.bundle.mjs, started by dist/<name>.mjs, which first turns source maps on for our own code
// only: stack traces name the TypeScript sources, and the maps of node_modules are not parsed and kept
// (`--enable-source-maps` keeps them all: about 7 MB more resident memory per idle service).
// npm dependencies stay external and are installed in the image with `npm ci --omit=dev`.
// The build is fixed into every bundle: the root package.json's version, the commit
// (SVC_BUILD_COMMIT, else `git rev-parse HEAD`, else none) and the build time, as `__SVC_BUILD_INFO__`
// (shared/runtime/src/build-info.ts). `node scripts/build.mjs --outdir <dir>` writes elsewhere than dist/.
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { join } from "node:path";
import { build } from "esbuild";

import { buildAdmin } from "./build-admin.mjs";
import { buildCli, buildCliPackage } from "./build-cli.mjs";

const services = ["gateway", "rbac", "resolver", "plugin-registry", "webhook-dispatcher", "job-reaper"];
const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
const external = [...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.optionalDependencies ?? {})];
const at = process.argv.indexOf("--outdir");
const out = at > 0 ? process.argv[at + 1] : "dist";
if (!out || out.startsWith("-")) {
  console.error("usage: node scripts/build.mjs [--outdir <dir>]");
  process.exit(2);
}

function commit() {
  if (process.env.SVC_BUILD_COMMIT) return process.env.SVC_BUILD_COMMIT;
  try {
    return execFileSync("git", ["rev-parse", "HEAD"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    }).trim();
  } catch {
    return null;
  }
}
const buildInfo = { version: pkg.version, commit: commit(), builtAt: new Date().toISOString() };

// Node's built-in modules are loaded with require() in the bundles, not imported. An ESM import of a
// built-in reads every one of its exports at once, and node:http's lazy WebSocket, CloseEvent and
// MessageEvent exports then load undici, HTTP/2, perf_hooks and worker_threads, which no service uses at
// rest: 2-4 MB more resident memory in an idle service (about 14 MB in a bare process). Through require()
// an export is read when the code uses it.
const builtinName = new RegExp(
  `^(node:)?(${builtinModules.map((m) => m.replace(/^node:/, "").replace(/[/]/g, "\\/")).join("|")})$`,
);
const builtinsByRequire = {
  name: "builtins-by-require",
  setup(b) {
    b.onResolve({ filter: builtinName }, (args) =>
      args.namespace === "builtin-require"
        ? { path: args.path, external: true }
        : { path: args.path, namespace: "builtin-require" },
    );
    b.onLoad({ filter: /.*/, namespace: "builtin-require" }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(args.path)});`,
      loader: "js",
    }));
  },
};

// V8 holds a script's source as one string, in two bytes a character as soon as one of them is beyond
// Latin-1. esbuild escapes non-ASCII text in strings and regular expressions, but keeps it in the doc
// comments it keeps: four "…" in comments made each service hold its bundle's source twice as large (the
// gateway's 1.3 MB instead of 0.66). What is left after esbuild (comments only) is written as escapes.
const asciiOnly = {
  name: "ascii-only",
  setup(b) {
    b.onEnd(() => {
      const file = b.initialOptions.outfile;
      if (file === undefined) return;
      const text = readFileSync(file, "utf8");
      if (!/[^\x00-\x7f]/.test(text)) return;
      writeFileSync(
        file,
        text.replace(/[^\x00-\x7f]/gu, (c) => `\\u{${c.codePointAt(0).toString(16)}}`),
      );
    });
  },
};

const common = {
  bundle: true,
  platform: "node",
  target: "node24",
  format: "esm",
  sourcemap: true,
  // Stack traces need the mappings and the sources' names only; the sources' text would be kept in every
  // process's heap for the life of the process (1.6 MB in the gateway's).
  sourcesContent: false,
  external,
  logLevel: "warning",
  define: { __SVC_BUILD_INFO__: JSON.stringify(buildInfo) },
  plugins: [builtinsByRequire, asciiOnly],
  banner: {
    js: 'import { createRequire as __svcCreateRequire } from "node:module";\nconst require = __svcCreateRequire(import.meta.url);',
  },
};

mkdirSync(out, { recursive: true });
await Promise.all(
  services.map(async (name) => {
    await build({
      ...common,
      entryPoints: [`services/${name}/src/main.ts`],
      outfile: join(out, `${name}.bundle.mjs`),
    });
    writeFileSync(
      join(out, `${name}.mjs`),
      [
        "// The service's start: source maps for its own code (not node_modules'), then the service.",
        'import { setSourceMapsSupport } from "node:module";',
        "setSourceMapsSupport(true, { nodeModules: false, generatedCode: false });",
        `await import("./${name}.bundle.mjs");`,
        "",
      ].join("\n"),
    );
  }),
);
for (const script of ["migrate", "bootstrap-operator"]) {
  await build({ ...common, entryPoints: [`scripts/${script}.ts`], outfile: join(out, `${script}.mjs`) });
}
// The plugin author's CLI: one self-contained bundle, and the npm package around it.
await buildCli(join(out, "svc-plugin.mjs"), buildInfo);
await buildCliPackage(join(out, "svc-plugin"), buildInfo);
// The plugin runtime's and the surface renderer's workers are loaded by URL next to the registry's bundle.
// The plugin worker is bundled with its NATS client: a spare process then loads one file instead of the
// client's 56 modules, which started a process in about 45 ms instead of 54 (a bare node takes 25) and
// kept 1.5 MB less resident.
await build({
  ...common,
  external: [],
  sourcemap: false,
  entryPoints: ["services/plugin-registry/src/runtime/plugin-worker.mjs"],
  outfile: join(out, "plugin-worker.mjs"),
});
// The surface renderer's worker likewise, with nunjucks and the template sandbox: a render process then
// reads nothing of node_modules (the registry built grants it none; from the sources it reads nunjucks's).
// nunjucks loads chokidar only to watch templates, which the renderer does not ask for.
await build({
  ...common,
  external: ["chokidar"],
  sourcemap: false,
  entryPoints: ["services/plugin-registry/src/runtime/render-worker.mjs"],
  outfile: join(out, "render-worker.mjs"),
});
// Tracing's OTLP export runs in a worker thread of each service that traces (worker-exporter.ts in
// @svc/observability), loaded by URL next to the service's bundle.
await build({
  ...common,
  sourcemap: false,
  entryPoints: ["shared/observability/src/trace-export-worker.mjs"],
  outfile: join(out, "trace-export-worker.mjs"),
});
// The gateway's static shells (surface-app/, admin/ with the console built into it, 404.html), found next
// to its bundle.
await buildAdmin();
cpSync("services/gateway/static", join(out, "static"), { recursive: true });
console.log(
  `built ${services.length} services, the migrator, the operator bootstrap and svc-plugin ${buildInfo.version}` +
    ` (${buildInfo.commit?.slice(0, 12) ?? "no commit"}) into ${out}/`,
);
