/**
 * The reason a failed plugin is given (real child processes, no NATS): a heap filling up stalls the process
 * in garbage collection, and the heartbeat may notice before V8 aborts it. Whichever comes first, the
 * reason names the memory limit; a busy loop is named as one. The heartbeat here is short (100 ms), so the
 * stall is usually seen before the abort: the race the containment test in test/plugin-runtime.test.ts
 * runs into at 600 ms.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { afterAll, describe, expect, it } from "vitest";

import { WorkerHost, WorkerPool } from "./worker-host.js";

const base = mkdtempSync(join(tmpdir(), "svc-worker-host-"));
const root = join(base, "plugins");
mkdirSync(root);
const pool = new WorkerPool({
  memoryLimitMb: 32,
  natsServers: null,
  slotsDir: join(base, "processes"),
  spares: 0,
});
const quiet = { debug() {}, info() {}, warn() {}, error() {} } as never;

afterAll(async () => {
  await pool.close();
  rmSync(base, { recursive: true, force: true });
});

/** A plugin `<name>.mjs` in `root` whose source is `source`, hosted with a 100 ms hang timeout. */
function hostOf(name: string, source: string, onFailure: (reason: string) => void): WorkerHost {
  writeFileSync(join(root, `${name}.mjs`), source);
  return new WorkerHost(pool, {
    pluginId: name,
    version: "1.0.0",
    root,
    entryFile: `${name}.mjs`,
    entryTypeName: "Plugin",
    hangTimeoutMs: 100,
    memoryLimitMb: 32,
    startTimeoutMs: 10_000,
    log: quiet,
    publish: async () => undefined,
    onFailure,
  });
}

/** Starts a plugin whose activate() schedules `body` to run once the plugin is ready. */
function failureOf(name: string, body: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const source = `export class Plugin { activate() { setTimeout(() => { ${body} }, 50); } }\n`;
    hostOf(name, source, resolve).ready.catch(reject);
  });
}

describe("the reason a plugin's process was stopped", () => {
  it("names the memory limit for a heap that fills up, however the process is stopped", async () => {
    for (let run = 0; run < 3; run++) {
      const reason = await failureOf(
        `hog${run}`,
        "const keep = []; for (;;) keep.push(new Array(1e6).fill(Math.random()));",
      );
      expect(reason).toMatch(/exceeded its memory limit/);
    }
  });

  it("names a busy loop as one", async () => {
    const reason = await failureOf("spin", "for (;;) {}");
    expect(reason).toMatch(/stopped answering for more than 100 ms/);
  });
});

describe("the heartbeat after a stall of the registry's own loop", () => {
  it("does not fail a plugin that answers once the registry's loop runs again", async () => {
    const failures: string[] = [];
    const host = hostOf("calm", "export class Plugin { activate() {} }\n", (reason) => failures.push(reason));
    try {
      await host.ready;
      // This process's loop blocked for six hang timeouts: the plugin's pongs wait unread meanwhile.
      const until = Date.now() + 600;
      while (Date.now() < until) {
        // busy: nothing of this process's runs
      }
      // Past the grace the hang check gives a silent worker (1 s), and a few heartbeats more.
      await new Promise((resolve) => setTimeout(resolve, 1_600));
      expect(failures).toEqual([]);
      expect(host.running).toBe(true);
    } finally {
      await host.stop();
    }
  });
});

describe("the pool's spare processes", () => {
  it("keeps the spares started, hands one to a plugin and starts another in its place, and ends them on close", async () => {
    const spares = new WorkerPool({
      memoryLimitMb: 32,
      natsServers: null,
      slotsDir: join(base, "spares"),
      spares: 2,
    });
    let left: Array<number | undefined> = [];
    try {
      spares.refill();
      const started = spares.spareProcesses();
      expect(started).toHaveLength(2);
      const taken = spares.take();
      // The first spare, already started: the plugin does not wait for a process to boot.
      expect(taken.isolate.pid).toBe(started[0]);
      await new Promise((resolve) => setImmediate(resolve));
      const now = spares.spareProcesses();
      expect(now).toHaveLength(2);
      expect(now[0]).toBe(started[1]);
      expect(now[1]).not.toBe(taken.isolate.pid);
      await taken.isolate.kill();
      // A spare that died is not handed out: the next take starts or takes a live one.
      const first = now[0] as number;
      process.kill(first, "SIGKILL");
      await expect.poll(() => spares.spareProcesses().includes(first)).toBe(false);
      const next = spares.take();
      expect(next.isolate.pid).not.toBe(first);
      expect(next.isolate.exited).toBe(false);
      await next.isolate.kill();
      // The pool tops up at the next turn; the kill's exit can be seen before that turn.
      await expect.poll(() => spares.spareProcesses()).toHaveLength(2);
      left = spares.spareProcesses();
    } finally {
      await spares.close();
    }
    // Closing ended the spares' processes.
    for (const pid of left) expect(() => process.kill(pid as number, 0)).toThrow(/ESRCH/);
  });
});

/** Loads `files` (the entry is `entry.mjs`) and answers why the load failed. */
async function loadFailure(name: string, files: Record<string, string>, entryTypeName = "Plugin") {
  const dir = join(base, name);
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(join(dir, file, ".."), { recursive: true });
    writeFileSync(join(dir, file), text);
  }
  const host = new WorkerHost(pool, {
    pluginId: name,
    version: "1.0.0",
    root: dir,
    entryFile: "entry.mjs",
    entryTypeName,
    hangTimeoutMs: 5_000,
    memoryLimitMb: 64,
    startTimeoutMs: 10_000,
    log: quiet,
    publish: async () => undefined,
    onFailure: () => undefined,
  });
  const error = await host.ready.then(
    () => undefined,
    (e: unknown) => e as Error,
  );
  expect(error, name).toBeInstanceOf(Error);
  return (error as Error).message;
}

describe("why a plugin did not load: the file and line", () => {
  it("a syntax error in the entry, or in a module it imports", async () => {
    expect(await loadFailure("syntax", { "entry.mjs": "export class Plugin {}\nconst = 1;\n" })).toMatch(
      /entry\.mjs:2: SyntaxError: /,
    );
    expect(
      await loadFailure("nested", {
        "entry.mjs": 'import { x } from "./lib/util.mjs";\nexport class Plugin { y = x; }\n',
        "lib/util.mjs": "export const x = 1;\n\n\nlet let = 2;\n",
      }),
    ).toMatch(/lib\/util\.mjs:4: SyntaxError: /);
  });

  it("an exception thrown while the module runs or the plugin activates", async () => {
    expect(
      await loadFailure("throws", {
        "entry.mjs": "export class Plugin {\n  activate() {\n    throw new Error('no config');\n  }\n}\n",
      }),
    ).toMatch(/entry\.mjs:3: Error: no config/);
  });

  it("a missing export names the file, the export asked for and those there are", async () => {
    const message = await loadFailure("missing", {
      "entry.mjs": "export class Plugn {}\nexport const a = 1;\n",
    });
    expect(message).toContain("the entry module entry.mjs has no export 'Plugin'");
    expect(message).toContain("it exports 'Plugn', 'a'");
  });
});
