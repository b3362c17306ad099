/**
 * The renderer's processes (real ones): a template that exhausts its process's heap fails its render as
 * soon as the process ends, not at the time limit, and the next render gets a fresh process.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { afterAll, describe, expect, it } from "vitest";

import { SurfaceRenderer } from "./renderer.js";

const root = mkdtempSync(join(tmpdir(), "svc-renderer-"));
const dir = join(root, "views");
mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, "greedy.njk"), "{{ range(0, 1000000000) | length }}");
writeFileSync(join(dir, "plain.njk"), "{{ 6 * 7 }}");
// A time limit no test waits out: only the process's end can fail the greedy render within the test.
const renderer = new SurfaceRenderer({ size: 1, timeoutMs: 600_000, readable: [root], memoryLimitMb: 48 });
afterAll(async () => {
  await renderer.close();
  rmSync(root, { recursive: true, force: true });
});

const render = (entry: string) =>
  renderer.render({ chainKey: "c", roots: [{ pluginId: "p", dir }], entry, context: {} });

describe("a render whose process ends", () => {
  it("fails when the process ends, and the next render runs in a fresh one", async () => {
    await expect(render("greedy.njk")).rejects.toThrow(/render process ended .* before it answered/);
    await expect(render("plain.njk")).resolves.toBe("42");
  }, 60_000);
});
