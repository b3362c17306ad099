/**
 * The container image and the version fixed at build time. `docker build` cannot
 * run here, so this checks what it would use: every file deploy/Dockerfile copies exists in the tree or is
 * made by the build (`scripts/build.mjs`, which `make build` runs), every bundle the image and the chart
 * start is built, the image runs as a non-root user with production dependencies only and carries the
 * host version as its label. Then it runs the built gateway bundle and reads the version, commit and
 * build time that the build fixed into it from `/version` (and the version from `/health`).
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { builtinModules } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";

import { freePort, repoRoot, SERVICE_ENV, SERVICE_NODE_FLAGS, SERVICES } from "../scripts/lib/stack.js";
import { SurfaceRenderer } from "../services/plugin-registry/src/runtime/renderer.js";
import { WorkerPool } from "../services/plugin-registry/src/runtime/worker-host.js";
import { createHarness } from "./support/harness.js";
import { http } from "./support/http.js";
import { startPluginHost } from "./support/plugin-host.js";
import { eventually } from "./support/wait.js";

const pkg = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { version: string };

interface Instruction {
  readonly keyword: string;
  readonly args: string;
}
interface Stage {
  readonly from: string;
  readonly name: string | undefined;
  readonly instructions: Instruction[];
}

/** The Dockerfile's stages and their instructions (continued lines joined, comments dropped). */
function parseDockerfile(text: string): { globalArgs: string[]; stages: Stage[] } {
  const logical = text
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
  const globalArgs: string[] = [];
  const stages: Stage[] = [];
  for (const line of logical) {
    const [keyword = "", ...rest] = line.split(/\s+/);
    const args = rest.join(" ");
    if (keyword.toUpperCase() === "FROM") {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      stages.push({ from: m?.[1] ?? args, name: m?.[2], instructions: [] });
    } else if (stages.length === 0) {
      if (keyword.toUpperCase() === "ARG") globalArgs.push(args);
    } else stages.at(-1)?.instructions.push({ keyword: keyword.toUpperCase(), args });
  }
  return { globalArgs, stages };
}

const dockerfile = parseDockerfile(readFileSync(join(repoRoot, "deploy", "Dockerfile"), "utf8"));
const build = dockerfile.stages.find((s) => s.name === "build");
const runtime = dockerfile.stages.at(-1);
/** `COPY --from=build /app/<path> <dest>` of the final stage: the paths, relative to the build's /app. */
const copiedFromBuild = (runtime?.instructions ?? [])
  .filter((i) => i.keyword === "COPY")
  .map((i) => {
    const m = /^--from=(\S+)\s+(\S+)\s+(\S+)$/.exec(i.args);
    return { from: m?.[1], source: m?.[2] ?? "", raw: i.args };
  });

// The bundles, built once into a directory inside the tree (so that their npm imports resolve).
const out = mkdtempSync(join(repoRoot, "node_modules", ".cache-svc-build-"));
let built = false;
beforeAll(() => {
  execFileSync(process.execPath, ["scripts/build.mjs", "--outdir", out], { cwd: repoRoot, stdio: "pipe" });
  built = true;
}, 120_000);
const children = new Set<ChildProcess>();
afterAll(() => {
  for (const child of children) child.kill("SIGKILL");
  rmSync(out, { recursive: true, force: true });
});

describe("the container image (deploy/Dockerfile)", () => {
  it("is multi-stage: a build stage and a non-root runtime stage that takes only the build's output", () => {
    expect(build, "a stage named build").toBeDefined();
    expect(dockerfile.stages.length).toBeGreaterThanOrEqual(2);
    expect(runtime?.name).not.toBe("build");
    // Nothing from the build context enters the final image directly: only what the build stage made.
    for (const copy of copiedFromBuild) expect(copy.from, copy.raw).toBe("build");
    const user = runtime?.instructions.filter((i) => i.keyword === "USER").at(-1)?.args ?? "root";
    const uid = user.split(":")[0] ?? "";
    expect(uid, "USER is a non-root uid").toMatch(/^[1-9]\d*$/);
    // Production dependencies only: the build stage's last install omits dev dependencies.
    const runs = (build?.instructions ?? []).filter((i) => i.keyword === "RUN").map((i) => i.args);
    const installs = runs
      .join(" && ")
      .split("&&")
      .filter((c) => /\bnpm ci\b/.test(c));
    expect(installs.at(-1)).toMatch(/--omit=dev/);
    expect(runs.join("\n")).toMatch(/node scripts\/build\.mjs/);
    // The host's node_modules and dist never enter the build context.
    const ignored = readFileSync(join(repoRoot, ".dockerignore"), "utf8").split("\n");
    expect(ignored).toEqual(expect.arrayContaining(["node_modules", "dist", ".git"]));
  });

  it("ships the Node.js release that .node-version names, which is the one these tests run on", () => {
    const pinned = readFileSync(join(repoRoot, ".node-version"), "utf8").trim();
    const arg = dockerfile.globalArgs.find((a) => a.startsWith("NODE_VERSION="));
    expect(arg, "ARG NODE_VERSION=<release>").toBe(`NODE_VERSION=${pinned}`);
    for (const stage of dockerfile.stages) expect(stage.from).toBe("node:${NODE_VERSION}-bookworm-slim");
    // An LTS line (even major), and the suite's own runtime (make test and .ci/run use scripts/node-env.sh).
    expect(Number(pinned.split(".")[0]) % 2).toBe(0);
    expect(process.versions.node.split(".")[0]).toBe(pinned.split(".")[0]);
    const engines = (
      JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { engines: { node: string } }
    ).engines.node;
    expect(engines).toBe(`>=${pinned.split(".")[0]}`);
  });

  it("starts the services with the Node flags and environment make dev and the bench use", () => {
    const entrypoint = runtime?.instructions.filter((i) => i.keyword === "ENTRYPOINT").at(-1)?.args ?? "";
    expect(JSON.parse(entrypoint)).toEqual(["node", ...SERVICE_NODE_FLAGS]);
    const env = Object.fromEntries(
      (runtime?.instructions ?? [])
        .filter((i) => i.keyword === "ENV")
        .flatMap((i) => i.args.split(/\s+/))
        .map((pair) => [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)]),
    );
    expect(env).toMatchObject({ NODE_ENV: "production", ...SERVICE_ENV });
  });

  it("copies only files that exist in the tree or that the build makes", () => {
    expect(built).toBe(true);
    expect(copiedFromBuild.length).toBeGreaterThan(3);
    for (const { source, raw } of copiedFromBuild) {
      expect(source, raw).toMatch(/^\/app\//);
      const path = source.slice("/app/".length);
      if (path === "dist") {
        expect(readdirSync(out).length, raw).toBeGreaterThan(0);
      } else if (path.startsWith("dist/")) {
        expect(existsSync(join(out, path.slice("dist/".length))), raw).toBe(true);
      } else if (path === "node_modules") {
        // Made by `npm ci` from the lock file.
        expect(existsSync(join(repoRoot, "package-lock.json")), raw).toBe(true);
      } else {
        expect(existsSync(join(repoRoot, path)), raw).toBe(true);
      }
    }
    // Every service's migrations are in the image (the migrator needs them all).
    const migrations = readdirSync(join(repoRoot, "services")).filter((s) =>
      existsSync(join(repoRoot, "services", s, "migrations")),
    );
    expect(migrations.length).toBeGreaterThan(0);
    for (const service of migrations) {
      expect(copiedFromBuild.map((c) => c.source)).toContain(`/app/services/${service}/migrations`);
    }
  });

  it("the build makes every bundle the image and the chart start", () => {
    const cmd = runtime?.instructions.filter((i) => i.keyword === "CMD").at(-1)?.args ?? "[]";
    const started = new Set<string>((JSON.parse(cmd) as string[]).filter((a) => a.startsWith("dist/")));
    // The chart's containers: one Deployment per service and the migration Job.
    const templates = join(repoRoot, "deploy", "helm", "svc", "templates");
    for (const file of readdirSync(templates)) {
      for (const m of readFileSync(join(templates, file), "utf8").matchAll(/args: \["(dist\/[^"]+)"/g)) {
        const arg = m[1] ?? "";
        if (arg.includes("{{ $name }}")) for (const s of SERVICES) started.add(arg.replace("{{ $name }}", s));
        else started.add(arg);
      }
    }
    expect(started).toContain("dist/migrate.mjs");
    expect(started.size).toBeGreaterThanOrEqual(SERVICES.length + 1);
    for (const bundle of [...started, "dist/svc-plugin.mjs", "dist/bootstrap-operator.mjs"]) {
      const file = join(out, bundle.slice("dist/".length));
      expect(existsSync(file), bundle).toBe(true);
      // A service's start file turns source maps on and imports its bundle (scripts/build.mjs).
      const imported = /await import\("\.\/([^"]+\.bundle\.mjs)"\)/.exec(readFileSync(file, "utf8"))?.[1];
      const code = imported === undefined ? file : join(out, imported);
      expect(statSync(code).size, bundle).toBeGreaterThan(1_000);
      // The version is fixed into it; the root package.json (its scripts, its dependency lists) is not.
      const text = readFileSync(code, "utf8");
      expect(text, bundle).toContain(JSON.stringify(pkg.version));
      expect(text, bundle).not.toMatch(/\bdevDependencies\b/);
    }
    // Loaded by URL next to the registry's bundle (the plugin and render workers) and every service's (the
    // span export's worker), and the gateway's static shells.
    for (const extra of [
      "plugin-worker.mjs",
      "render-worker.mjs",
      "trace-export-worker.mjs",
      "static/404.html",
    ]) {
      expect(existsSync(join(out, extra)), extra).toBe(true);
    }
  });

  it("the bundles import at run time only what the image installs: production dependencies and Node's own", () => {
    const manifest = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
      dependencies: Record<string, string>;
    };
    const installed = new Set(Object.keys(manifest.dependencies));
    // Required only on a path no service takes, inside a try.
    const OPTIONAL: Record<string, string> = {
      chokidar: "nunjucks loads it to watch templates; the renderer does not watch",
    };
    const builtins = new Set(builtinModules);
    const missing: string[] = [];
    let seen = 0;
    for (const file of readdirSync(out).filter((f) => f.endsWith(".mjs"))) {
      const text = readFileSync(join(out, file), "utf8");
      // (`from "x"` with a space, as esbuild writes it: nunjucks's parser holds `skipSymbol("from")`.)
      const pattern = /(?:\bfrom\s+|\bimport\s*\(\s*|\b__require\s*\(\s*|^import\s+)"([^"./][^"]*)"/gm;
      for (const m of text.matchAll(pattern)) {
        const specifier = m[1] ?? "";
        seen += 1;
        if (specifier.startsWith("node:") || builtins.has(specifier.split("/")[0] ?? "")) continue;
        const parts = specifier.split("/");
        const name = specifier.startsWith("@") ? parts.slice(0, 2).join("/") : (parts[0] ?? "");
        if (!installed.has(name) && !(name in OPTIONAL)) missing.push(`${file}: ${specifier}`);
      }
    }
    expect(seen).toBeGreaterThan(50);
    // `npm ci --omit=dev --omit=optional` would not install these: the service would not start.
    expect(missing).toEqual([]);
  });

  it("the built plugin worker, its NATS client bundled in, loads a plugin and reads nothing of node_modules", async () => {
    const worker = readFileSync(join(out, "plugin-worker.mjs"), "utf8");
    expect(worker).not.toMatch(/from\s*"@nats-io\//);
    const work = mkdtempSync(join(tmpdir(), "svc-built-worker-"));
    const outside = join(work, "outside.txt");
    const natsPackage = join(repoRoot, "node_modules", "@nats-io", "transport-node", "package.json");
    expect(existsSync(natsPackage)).toBe(true);
    writeFileSync(outside, "not for plugins");
    mkdirSync(join(work, "plugin"));
    writeFileSync(join(work, "plugin", "data.txt"), "own");
    writeFileSync(
      join(work, "plugin", "index.mjs"),
      [
        'const fs = process.getBuiltinModule("node:fs");',
        "const attempt = (f) => { try { return f(); } catch (e) { return e.code ?? e.message; } };",
        "export class Plugin {",
        "  activate(host) {",
        '    host.log.info("probe", {',
        '      own: attempt(() => fs.readFileSync(new URL("./data.txt", import.meta.url), "utf8")),',
        `      outside: attempt(() => fs.readFileSync(${JSON.stringify(outside)}, "utf8")),`,
        `      nodeModules: attempt(() => fs.readFileSync(${JSON.stringify(natsPackage)}, "utf8").length > 0),`,
        "    });",
        "  }",
        "}",
        "",
      ].join("\n"),
    );
    const logged: unknown[] = [];
    const log = { debug() {}, info: (f: { data: unknown }) => logged.push(f.data), warn() {}, error() {} };
    const pool = new WorkerPool({
      memoryLimitMb: 64,
      natsServers: null,
      slotsDir: join(work, "slots"),
      spares: 0,
      // As the built registry runs it: nothing of node_modules readable.
      worker: { url: pathToFileURL(join(out, "plugin-worker.mjs")), imports: [] },
    });
    try {
      const host = startPluginHost(pool, "built", work, { log: log as never });
      await host.ready;
      expect(host.has("activate")).toBe(true);
      await host.stop();
      expect(logged).toEqual([
        { own: "own", outside: "ERR_ACCESS_DENIED", nodeModules: "ERR_ACCESS_DENIED" },
      ]);
    } finally {
      await pool.close();
      rmSync(work, { recursive: true, force: true });
    }
  });

  it("the built render worker, nunjucks bundled in, renders a chain's templates and is granted nothing of node_modules", async () => {
    const worker = readFileSync(join(out, "render-worker.mjs"), "utf8");
    expect(worker).not.toMatch(/(?:from\s*|import\s*\(\s*|require\s*\(\s*)"nunjucks"/);
    const work = mkdtempSync(join(tmpdir(), "svc-built-render-"));
    const dir = join(work, "theme", "views", "surface");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "layout.njk"), "<main>{% block body %}{% endblock %}</main>");
    writeFileSync(
      join(dir, "index.njk"),
      '{% extends "layout.njk" %}{% block body %}{{ 6 * 7 }} {{ who | upper }}{% endblock %}',
    );
    // As the built registry runs it: nothing of node_modules readable.
    const renderer = new SurfaceRenderer({
      size: 1,
      timeoutMs: 10_000,
      readable: [work],
      worker: { url: pathToFileURL(join(out, "render-worker.mjs")), imports: [] },
    });
    try {
      const html = await renderer.render({
        chainKey: "built",
        roots: [{ pluginId: "theme", dir }],
        entry: "index.njk",
        context: { who: "you" },
      });
      expect(html).toBe("<main>42 YOU</main>");
      const args = readdirSync("/proc")
        .filter((name) => /^\d+$/.test(name))
        .map((pid) => {
          try {
            return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
          } catch {
            return [];
          }
        })
        .find((a) => a.some((x) => x === join(out, "render-worker.mjs")));
      expect(args, "the render process").toBeDefined();
      expect(args).toContain("--permission");
      const readable = (args ?? []).filter((a) => a.startsWith("--allow-fs-read=")).map((a) => a.slice(16));
      expect(readable.sort()).toEqual([out, `${work}/*`].sort());
    } finally {
      await renderer.close();
      rmSync(work, { recursive: true, force: true });
    }
  });

  it("is labelled with the host version of package.json, which the build refuses to contradict", () => {
    expect(dockerfile.globalArgs).toContain("VERSION");
    const runtimeArgs = (runtime?.instructions ?? []).filter((i) => i.keyword === "ARG").map((i) => i.args);
    expect(runtimeArgs).toContain("VERSION");
    const labels = (runtime?.instructions ?? []).filter((i) => i.keyword === "LABEL").map((i) => i.args);
    expect(labels.join(" ")).toContain('org.opencontainers.image.version="$VERSION"');
    const check = (build?.instructions ?? []).find((i) => i.keyword === "RUN" && i.args.includes("$VERSION"));
    expect(check?.args).toContain('require("./package.json").version');
    // `make image` passes package.json's version and the commit.
    const dryRun = spawnSync("make", ["-n", "image"], { cwd: repoRoot, encoding: "utf8" });
    expect(dryRun.status, dryRun.stderr).toBe(0);
    expect(dryRun.stdout).toContain(`--build-arg VERSION=${pkg.version}`);
    expect(dryRun.stdout).toContain(`-t svc:${pkg.version}`);
    // The chart's default image tag is its appVersion: the same version.
    const chart = parseYaml(readFileSync(join(repoRoot, "deploy", "helm", "svc", "Chart.yaml"), "utf8")) as {
      appVersion: string;
    };
    expect(chart.appVersion).toBe(pkg.version);
  });
});

describe("the version fixed at build time", () => {
  it("the built gateway reports the version, commit and build time on /version (management port) and /health", async () => {
    const h = await createHarness();
    try {
      const port = await freePort();
      const management = await freePort();
      const child = spawn(process.execPath, [join(out, "gateway.mjs")], {
        cwd: repoRoot,
        env: {
          PATH: process.env.PATH ?? "",
          ...(await h.envFor("gateway")),
          GATEWAY_PORT: String(port),
          MANAGEMENT_PORT: String(management),
          MANAGEMENT_HOST: "127.0.0.1",
        },
        stdio: ["ignore", "ignore", "pipe"],
      });
      children.add(child);
      let stderr = "";
      child.stderr?.on("data", (c: Buffer) => (stderr += c.toString()));
      const commit = spawnSync("git", ["rev-parse", "HEAD"], { cwd: repoRoot, encoding: "utf8" });
      // The management port opens first; the HTTP port once the gateway's handlers are in place.
      const started = await eventually(
        () => http(`http://127.0.0.1:${port}/health`).catch(() => undefined),
        (r) => r?.status === 200,
        20_000,
        100,
      );
      expect(started?.status, `the gateway bundle did not start: ${stderr}`).toBe(200);
      const answer = await http(`http://127.0.0.1:${management}/version`);
      expect(answer.status).toBe(200);
      const version = answer.json<Record<string, unknown>>();
      expect(version).toMatchObject({
        service: "gateway",
        version: pkg.version,
        pluginContractVersion: expect.stringMatching(/^\d+\.\d+$/) as unknown,
      });
      // Run from the sources these are null: here they came from the build.
      expect(version.builtAt).toEqual(expect.stringMatching(/^\d{4}-\d\d-\d\dT/));
      if (commit.status === 0) expect(version.commit).toBe(commit.stdout.trim());
      expect((await http(`http://127.0.0.1:${port}/health`)).json()).toEqual({
        status: "ok",
        version: pkg.version,
      });
      // The build's details stay off the public port.
      expect((await http(`http://127.0.0.1:${port}/version`)).status).not.toBe(200);
      child.kill("SIGTERM");
    } finally {
      await h.stopAll();
    }
  }, 60_000);
});
