/**
 * Node's permission model around untrusted code (isolate.ts), with
 * real child processes: a plugin's code and a surface template run where they can read only their own
 * files, the packages their worker imports and the unpacked plugins. The host's environment
 * (`/proc/<registry pid>/environ`: DATABASE_URL, keys), other files, child processes, worker threads and
 * writes are refused.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { afterAll, describe, expect, it } from "vitest";

import { SurfaceRenderer } from "./renderer.js";
import { WorkerHost, WorkerPool } from "./worker-host.js";

const root = mkdtempSync(join(tmpdir(), "svc-confinement-"));
const outside = join(mkdtempSync(join(tmpdir(), "svc-outside-")), "secret.txt");
writeFileSync(outside, "not for plugins");
const pool = new WorkerPool({
  memoryLimitMb: 64,
  natsServers: null,
  slotsDir: join(root, "processes"),
  spares: 0,
});
const renderer = new SurfaceRenderer({ size: 1, timeoutMs: 5_000, readable: [root] });

afterAll(async () => {
  await pool.close();
  await renderer.close();
  rmSync(root, { recursive: true, force: true });
  rmSync(join(outside, ".."), { recursive: true, force: true });
});

/** What each attempt gave: the value read, or the error code that refused it. */
const PROBE = `
const attempt = (f) => { try { const v = f(); return typeof v === "string" ? "read: " + v.slice(0, 40) : "done"; } catch (e) { return e.code ?? e.message; } };
const fs = process.getBuiltinModule("node:fs");
const probe = (own, cached) => ({
  cachedCopy: attempt(() => fs.readFileSync(cached, "utf8")),
  environ: attempt(() => fs.readFileSync("/proc/" + process.ppid + "/environ", "latin1")),
  ownEnviron: attempt(() => fs.readFileSync("/proc/self/environ", "latin1")),
  passwd: attempt(() => fs.readFileSync("/etc/passwd", "utf8")),
  outside: attempt(() => fs.readFileSync(${JSON.stringify(outside)}, "utf8")),
  own: attempt(() => fs.readFileSync(own, "utf8")),
  write: attempt(() => fs.writeFileSync(own + ".written", "x")),
  spawn: attempt(() => process.getBuiltinModule("node:child_process").execFileSync("id").toString()),
  worker: attempt(() => new (process.getBuiltinModule("node:worker_threads").Worker)("0", { eval: true })),
  env: Object.keys(process.env).length,
});
`;

const REFUSED = {
  environ: "ERR_ACCESS_DENIED",
  ownEnviron: "ERR_ACCESS_DENIED",
  passwd: "ERR_ACCESS_DENIED",
  outside: "ERR_ACCESS_DENIED",
  write: "ERR_ACCESS_DENIED",
  spawn: "ERR_ACCESS_DENIED",
  worker: "ERR_ACCESS_DENIED",
  env: 0,
};

describe("a plugin's process", () => {
  it("reads its own files, and not the host's environment, other files; it writes and starts nothing", async () => {
    const dir = join(root, "probe");
    mkdirSync(dir);
    writeFileSync(join(dir, "data.txt"), "the plugin's own data");
    writeFileSync(
      join(dir, "index.mjs"),
      `${PROBE}\nexport class Plugin { activate(host) { host.log.info("probe", probe(new URL("./data.txt", import.meta.url).pathname, ${JSON.stringify(join(dir, "data.txt"))})); } }\n`,
    );
    const logged: unknown[] = [];
    const log = {
      debug() {},
      info: (fields: { data: unknown }) => logged.push(fields.data),
      warn() {},
      error() {},
    } as never;
    const host = new WorkerHost(pool, {
      pluginId: "probe",
      version: "1.0.0",
      root: dir,
      entryFile: "index.mjs",
      entryTypeName: "Plugin",
      hangTimeoutMs: 2_000,
      memoryLimitMb: 64,
      startTimeoutMs: 10_000,
      log,
      publish: async () => undefined,
      onFailure: () => undefined,
    });
    await host.ready;
    await host.stop();
    // Its own files, linked into its own folder: readable; the package as cached for every plugin
    // process (and every other plugin's): not.
    expect(logged[0]).toEqual({
      ...REFUSED,
      own: "read: the plugin's own data",
      cachedCopy: "ERR_ACCESS_DENIED",
    });
  });
});

describe("a surface render process", () => {
  // Templates cannot run code any more (template-sandbox.test.ts), so what confines the process is read
  // from its command line: the permission model, reading only its worker's folder, nunjucks and the cache.
  it("runs under the permission model, reading only its code, nunjucks and the plugin cache", async () => {
    const dir = join(root, "theme", "views", "surface");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "index.njk"), "{{ 1 + 1 }}");
    const html = await renderer.render({
      chainKey: "plain",
      roots: [{ pluginId: "theme", dir }],
      entry: "index.njk",
      context: {},
    });
    expect(html).toBe("2");
    const worker = readdirSync("/proc")
      .filter((name) => /^\d+$/.test(name))
      .map((pid) => {
        try {
          const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
          const ppid = Number(/^PPid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]);
          return { args, ppid };
        } catch {
          return { args: [], ppid: 0 };
        }
      })
      .find((p) => p.ppid === process.pid && p.args.some((a) => a.endsWith("render-worker.mjs")));
    expect(worker, "the render process").toBeDefined();
    const args = worker?.args ?? [];
    expect(args).toContain("--permission");
    const readable = args.filter((a) => a.startsWith("--allow-fs-read=")).map((a) => a.slice(16));
    expect(readable).toContain(`${root}/*`);
    expect(readable.some((r) => r.endsWith("/node_modules"))).toBe(true);
    expect(readable.some((r) => r === "/" || r === "/*" || r.startsWith("/proc"))).toBe(false);
    expect(args.some((a) => /^--allow-(child-process|worker|addons|fs-write)/.test(a))).toBe(false);
  });
});
