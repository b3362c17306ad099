/**
 * The known ways out of nunjucks, rendered in a real render process (SurfaceRenderer):
 * none runs code. Each payload, unguarded, would evaluate `"ESC" + "APED"` through Function (or reach
 * `process`); guarded, the render fails or shows nothing of it. Ordinary templates still render. And the
 * check that discards a render process whose shared state a template changed detects such changes.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { afterAll, describe, expect, it } from "vitest";

import { SurfaceRenderer } from "./renderer.js";
import { globalsChanged, snapshotGlobals } from "./template-sandbox.mjs";

const root = mkdtempSync(join(tmpdir(), "svc-template-sandbox-"));
const dir = join(root, "views");
mkdirSync(dir, { recursive: true });
const renderer = new SurfaceRenderer({ size: 1, timeoutMs: 5_000, readable: [root] });
afterAll(async () => {
  await renderer.close();
  rmSync(root, { recursive: true, force: true });
});

const CODE = `return "ESC" + "APED"`;
const PAYLOADS = [
  `{{ range.constructor(${JSON.stringify(CODE)})() }}`,
  `{{ cycler.constructor(${JSON.stringify(CODE)})() }}`,
  `{{ joiner.constructor(${JSON.stringify(CODE)})() }}`,
  `{{ range["constructor"](${JSON.stringify(CODE)})() }}`,
  `{{ range[["constructor"]](${JSON.stringify(CODE)})() }}`,
  `{{ ""["constructor"]["constructor"](${JSON.stringify(CODE)})() }}`,
  `{{ [].map.constructor(${JSON.stringify(CODE)})() }}`,
  `{% set f = range.constructor %}{{ f(${JSON.stringify(CODE)})() }}`,
  `{{ workspace.constructor.constructor(${JSON.stringify(CODE)})() }}`,
  `{{ workspace.__proto__.constructor.constructor(${JSON.stringify(CODE)})() }}`,
  `{{ range.constructor.call(null, ${JSON.stringify(CODE)})() }}`,
  `{{ range.bind.constructor(${JSON.stringify(CODE)})() }}`,
  `{{ constructor.constructor(${JSON.stringify(CODE)})() }}`,
  `{% macro m() %}x{% endmacro %}{{ m.constructor(${JSON.stringify(CODE)})() }}`,
  `{{ range.__proto__.constructor(${JSON.stringify(CODE)})() }}`,
  `{{ range.constructor("return process")().mainModule }}{{ "ESC" if range.constructor else "" }}APED-if-reached`,
];

async function render(template: string, name: string): Promise<string> {
  writeFileSync(join(dir, name), template);
  try {
    return await renderer.render({
      chainKey: name,
      roots: [{ pluginId: "probe", dir }],
      entry: name,
      context: { workspace: { name: "Site" } },
    });
  } catch (error) {
    return `refused: ${(error as Error).message}`;
  }
}

describe("templates cannot leave nunjucks", () => {
  it.each(PAYLOADS.map((p, i) => [i, p] as const))("payload %i runs no code", async (i, payload) => {
    const out = await render(payload, `p${i}.njk`);
    expect(out).not.toContain("ESCAPED");
  });

  it("ordinary templates, loops, filters and methods of data still work", async () => {
    const out = await render(
      "{% for i in range(3) %}{{ i }}{% endfor %}|{{ workspace.name | upper }}|{{ 'a,b'.split(',') | join('+') }}|{{ cycler('x','y').next() }}",
      "ok.njk",
    );
    expect(out).toBe("012|SITE|a+b|x");
  });
});

describe("the render process's integrity check", () => {
  it("notices a changed IPC send, JSON, a prototype's method or a new global", () => {
    const snapshot = snapshotGlobals();
    expect(globalsChanged(snapshot)).toBe(false);
    const stringify = JSON.stringify;
    JSON.stringify = (() => "tampered") as typeof JSON.stringify;
    expect(globalsChanged(snapshot)).toBe(true);
    JSON.stringify = stringify;
    expect(globalsChanged(snapshot)).toBe(false);
    (globalThis as Record<string, unknown>).injected = 1;
    expect(globalsChanged(snapshot)).toBe(true);
    delete (globalThis as Record<string, unknown>).injected;
    expect(globalsChanged(snapshot)).toBe(false);
  });
});
