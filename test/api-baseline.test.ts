/**
 * The public interface of the packages plugins build against is tracked
 * against a shipped and an unshipped baseline, and a mismatch fails `make api-check` (so `make check` and
 * CI). The repository matches its baselines; in a copy of the tree, a changed public type fails the check
 * with a diff, `--update` takes the change into the unshipped baseline, and the comparison with the
 * shipped one names it as a change that may break plugins; `--release` moves unshipped to shipped.
 */
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { afterAll, describe, expect, it } from "vitest";

import { compareReports, PUBLIC_PACKAGES, runApiCheck } from "../scripts/api-check.js";
import { repoRoot } from "../scripts/lib/stack.js";

const copies: string[] = [];
afterAll(() => {
  for (const dir of copies) rmSync(dir, { recursive: true, force: true });
});

/** The public packages, their tsconfigs and baselines in a fresh directory (node_modules linked). */
function copyTree(): string {
  const dir = mkdtempSync(join(tmpdir(), "svc-api-"));
  copies.push(dir);
  for (const file of ["tsconfig.json", "tsconfig.api.json", "tsconfig.api-extractor.json"])
    cpSync(join(repoRoot, file), join(dir, file));
  for (const name of PUBLIC_PACKAGES)
    cpSync(join(repoRoot, "shared", name), join(dir, "shared", name), { recursive: true });
  cpSync(join(repoRoot, "docs", "api"), join(dir, "docs", "api"), { recursive: true });
  cpSync(join(repoRoot, "docs", "sdk"), join(dir, "docs", "sdk"), { recursive: true });
  symlinkSync(join(repoRoot, "node_modules"), join(dir, "node_modules"));
  return dir;
}

const cli = (root: string, ...args: string[]) =>
  spawnSync(
    process.execPath,
    ["--import", "tsx", join(repoRoot, "scripts", "api-check.ts"), ...args, "--root", root],
    {
      cwd: repoRoot,
      encoding: "utf8",
    },
  );

describe("public API baselines (make api-check)", () => {
  it("the repository's plugin SDK and wire contract match their baselines", () => {
    const result = runApiCheck("check", copyTree());
    expect(result.mismatched, result.output).toEqual([]);
    expect(result.staleRollups, result.output).toEqual([]);
    // The rollup a plugin author uses is self-contained: the wire types it needs are inside.
    const rollup = readFileSync(join(repoRoot, "docs", "sdk", "plugin-sdk.d.ts"), "utf8");
    expect(rollup).toMatch(/export declare interface PluginHost \{/);
    expect(rollup).toMatch(/export declare interface PluginHttpRequest \{/);
    expect(rollup).not.toMatch(/from '@svc\//);
  }, 60_000);

  it("a changed public type fails the check until the baseline is updated; release moves unshipped to shipped", () => {
    // One copy with a change in each package: an added SDK member and a retyped wire contract field.
    const root = copyTree();
    const sdk = join(root, "shared", "plugin-sdk", "src", "index.ts");
    const source = readFileSync(sdk, "utf8");
    const changed = source.replace(
      "  readonly events: PluginEvents;\n}",
      "  readonly events: PluginEvents;\n  readonly tenantKey: string | null;\n}",
    );
    expect(changed).not.toBe(source);
    writeFileSync(sdk, changed);
    const wire = join(root, "shared", "wire-contract", "src", "index.ts");
    const wireSource = readFileSync(wire, "utf8");
    const retyped = wireSource.replace("readonly uptimeMs: number;", "readonly uptimeMs: string;");
    expect(retyped).not.toBe(wireSource);
    writeFileSync(wire, retyped);

    const failing = cli(root);
    expect(failing.status, failing.stdout + failing.stderr).toBe(1);
    expect(failing.stdout).toContain(
      "plugin-sdk: the public interface differs from docs/api/unshipped/plugin-sdk.api.md",
    );
    expect(failing.stdout).toContain("wire-contract: the public interface differs");
    expect(failing.stdout).toMatch(/^\+\s+readonly tenantKey: string \| null;$/m);
    expect(failing.stdout).toContain("docs/sdk/plugin-sdk.d.ts is out of date");

    // The CLI's modes run in this process from here (what `--update` and `--release` call): the same check
    // without another process loading TypeScript and API Extractor.
    runApiCheck("update", root);
    const passing = runApiCheck("check", root);
    expect(passing.mismatched, passing.output).toEqual([]);
    expect(passing.staleRollups, passing.output).toEqual([]);
    // Compared with the shipped baseline, an added member is an addition, a retyped one may break plugins.
    expect(passing.output).toMatch(/added\s+interface PluginHost \(new members\)/);
    expect(passing.output).toMatch(/CHANGED\s+interface PingReply\s+\(may break plugins/);

    runApiCheck("release", root);
    const shipped = readFileSync(join(root, "docs", "api", "shipped", "wire-contract.api.md"), "utf8");
    expect(shipped).toContain("readonly uptimeMs: string;");
    const released = cli(root);
    expect(released.status, released.stdout + released.stderr).toBe(0);
    expect(released.stdout).toContain("wire-contract: no change since the shipped baseline");
  }, 180_000);
});

describe("comparing reports", () => {
  const report = (code: string) => `## API Report\n\n\`\`\`ts\n${code}\n\`\`\`\n`;
  const before = report(
    "// @public\nexport interface A {\n    readonly x: string;\n}\n\n// @public\nexport type B = string;\n",
  );

  it("finds removed declarations and changed members, and tells additions apart", () => {
    expect(compareReports(before, before)).toEqual({ added: [], changedOrRemoved: [] });
    const removed = report("// @public\nexport interface A {\n    readonly x: string;\n}\n");
    expect(compareReports(before, removed).changedOrRemoved).toEqual(["type B (removed)"]);
    const narrowed = report(
      "// @public\nexport interface A {\n    readonly x: number;\n}\n\nexport type B = string;\n",
    );
    expect(compareReports(before, narrowed).changedOrRemoved).toEqual(["interface A"]);
    const retyped = report("export interface A {\n    readonly x: string;\n}\nexport type B = number;\n");
    expect(compareReports(before, retyped)).toEqual({ added: [], changedOrRemoved: ["type B"] });
    const grown = report(
      "export interface A {\n    readonly x: string;\n    readonly y?: string;\n}\nexport type B = string;\nexport type C = number;\n",
    );
    expect(compareReports(before, grown)).toEqual({
      added: ["interface A (new members)", "type C"],
      changedOrRemoved: [],
    });
  });
});

describe("the plugin SDK as an author uses it (docs/plugins.md, Types)", () => {
  /** The guide's JSDoc example, in a plugin directory beside the SDK's .d.ts, checked by tsc. */
  function checkExample(edit: (source: string) => string = (s) => s) {
    const guide = readFileSync(join(repoRoot, "docs", "plugins.md"), "utf8");
    const section = guide.slice(guide.indexOf("**Types.**"));
    const example = /```js\n([\s\S]*?)```/.exec(section)?.[1] ?? "";
    expect(example).toContain("@ts-check");
    const dir = mkdtempSync(join(tmpdir(), "svc-author-"));
    copies.push(dir);
    cpSync(join(repoRoot, "docs", "sdk", "plugin-sdk.d.ts"), join(dir, "plugin-sdk.d.ts"));
    const entry = join(dir, "hello", "index.mjs");
    cpSync(join(repoRoot, "examples", "plugins", "hello"), join(dir, "hello"), { recursive: true });
    writeFileSync(
      entry,
      `${edit(example)}\n/** @type {import("../plugin-sdk.js").PluginEntryExport} */\nexport const entry = HelloPlugin;\n`,
    );
    return spawnSync(
      process.execPath,
      [
        join(repoRoot, "node_modules", "typescript", "bin", "tsc"),
        "--noEmit",
        "--allowJs",
        "--checkJs",
        "--strict",
        "--module",
        "nodenext",
        "--target",
        "es2022",
        "--types",
        "node",
        "--typeRoots",
        join(repoRoot, "node_modules", "@types"),
        entry,
      ],
      { encoding: "utf8", cwd: dir },
    );
  }

  it("the guide's example type-checks against docs/sdk/plugin-sdk.d.ts", () => {
    const run = checkExample();
    expect(run.status, run.stdout + run.stderr).toBe(0);
  }, 60_000);

  it("and a misuse of the host API does not", () => {
    const run = checkExample((s) =>
      s.replace("this.host = host;", 'this.host = host;\n    host.log.shout("hi");'),
    );
    expect(run.status).not.toBe(0);
    expect(run.stdout).toContain("Property 'shout' does not exist on type 'PluginLog'");
  }, 60_000);
});
