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
const pool = new WorkerPool(32, null, join(base, "processes"), 0);
const quiet = { debug() {}, info() {}, warn() {}, error() {} } as never;

afterAll(async () => {
  await pool.close();
  rmSync(base, { recursive: true, force: true });
});

/** Starts a plugin whose activate() schedules `body` to run once the plugin is ready. */
function failureOf(name: string, body: string): Promise<string> {
  writeFileSync(
    join(root, `${name}.mjs`),
    `export class Plugin { activate() { setTimeout(() => { ${body} }, 50); } }\n`,
  );
  return new Promise<string>((resolve, reject) => {
    const host = new WorkerHost(pool, {
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
      onFailure: resolve,
    });
    host.ready.catch(reject);
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
