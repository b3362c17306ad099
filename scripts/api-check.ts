/**
 * `make api-check`: the public interface of the packages plugins build against,
 * `@svc/plugin-sdk` and `@svc/wire-contract`, tracked against two baselines (docs/releasing.md):
 *
 * - `docs/api/unshipped/<package>.api.md`: the interface as it stands on main, to ship with the next
 *   release. The check builds the declarations, runs API Extractor, and fails when its report differs
 *   from this baseline (the diff is printed): a public type changed without the baseline being updated.
 *   `--update` rewrites the baseline after an intended change; the change then shows in review.
 * - `docs/api/shipped/<package>.api.md`: the interface of the last release. The check lists what changed
 *   since (added, and changed or removed, which may break plugins built against the shipped contract).
 *   `--release` moves unshipped to shipped, the release step.
 *
 * The same run writes the declaration rollups plugin authors use (docs/sdk/<package>.d.ts) and checks
 * that the committed ones are current.
 *
 * Usage: node --import tsx scripts/api-check.ts [--update | --release] [--root <a copy of the tree>]
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

import type * as ApiExtractor from "@microsoft/api-extractor";

import { repoRoot } from "./lib/stack.js";

/** The packages whose interface is public, in dependency order. */
export const PUBLIC_PACKAGES = ["wire-contract", "plugin-sdk"] as const;

export interface ApiCheckResult {
  /** Packages whose report differs from the unshipped baseline (empty when all match). */
  readonly mismatched: string[];
  /** Rollups in docs/sdk/ that are out of date. */
  readonly staleRollups: string[];
  /** Per package, what changed since the shipped baseline. */
  readonly sinceShipped: Record<string, { added: string[]; changedOrRemoved: string[] }>;
  readonly output: string;
}

/** A declaration's key: its kind and name (`interface PluginHost`), or its first line. */
function keyOf(head: string): string {
  const m = /^export (?:declare )?(interface|type|const|function|class|enum|namespace) ([\w$]+)/.exec(head);
  return m === null ? head : `${m[1]} ${m[2]}`;
}

/**
 * A report's declarations by key, each as its lines (the first and its members): a shipped line that is
 * gone from the unshipped report is a changed or removed part of the interface.
 */
export function declarations(report: string): Map<string, string[]> {
  const code = report.split("```ts")[1]?.split("```")[0] ?? "";
  const out = new Map<string, string[]>();
  let current: string[] | undefined;
  for (const raw of code.split("\n")) {
    const line = raw.trimEnd();
    const text = line.trim();
    if (text === "" || text.startsWith("//")) continue;
    if (!/^\s/.test(line) && !/^[})\]]/.test(text)) {
      current = [text];
      out.set(keyOf(text), current);
    } else current?.push(text);
  }
  return out;
}

/** What changed from the shipped report to the unshipped one, by declaration key. */
export function compareReports(
  shipped: string,
  unshipped: string,
): { added: string[]; changedOrRemoved: string[] } {
  const before = declarations(shipped);
  const after = declarations(unshipped);
  const added: string[] = [];
  const changedOrRemoved: string[] = [];
  for (const [key, lines] of before) {
    const now = after.get(key);
    if (now === undefined) changedOrRemoved.push(`${key} (removed)`);
    else if (lines.some((l) => !now.includes(l))) changedOrRemoved.push(key);
    else if (now.some((l) => !lines.includes(l))) added.push(`${key} (new members)`);
  }
  for (const key of after.keys()) if (!before.has(key)) added.push(key);
  return { added, changedOrRemoved };
}

/**
 * Runs the check (or `update`, `release`) on the tree at `root`: the repository, or a copy of its public
 * packages, tsconfigs and docs/api (the test changes a type in a copy).
 */
export function runApiCheck(mode: "check" | "update" | "release" = "check", root = repoRoot): ApiCheckResult {
  const cache = join(root, ".api-build");
  const unshippedDir = join(root, "docs", "api", "unshipped");
  const shippedDir = join(root, "docs", "api", "shipped");
  const sdkDir = join(root, "docs", "sdk");
  const require = createRequire(import.meta.url);
  const { CompilerState, Extractor, ExtractorConfig, ExtractorLogLevel } =
    require("@microsoft/api-extractor") as typeof ApiExtractor;
  const lines: string[] = [];
  const say = (line: string) => lines.push(line);

  rmSync(cache, { recursive: true, force: true });
  const tsc = spawnSync(
    process.execPath,
    [require.resolve("typescript/bin/tsc"), "-p", "tsconfig.api.json"],
    {
      cwd: root,
      encoding: "utf8",
    },
  );
  if (tsc.status !== 0) throw new Error(`declarations did not build:\n${tsc.stdout}${tsc.stderr}`);

  const mismatched: string[] = [];
  const staleRollups: string[] = [];
  const sinceShipped: ApiCheckResult["sinceShipped"] = {};
  mkdirSync(sdkDir, { recursive: true });
  const configs = PUBLIC_PACKAGES.map((name) =>
    ExtractorConfig.loadFileAndPrepare(join(root, "shared", name, "api-extractor.json")),
  );
  // One TypeScript program for both packages (both entry points in it): API Extractor otherwise builds
  // one per package, most of a check's time.
  const compilerState = CompilerState.create(configs[0] as ApiExtractor.ExtractorConfig, {
    additionalEntryPoints: configs.map((c) => c.mainEntryPointFilePath),
  });
  for (const [i, name] of PUBLIC_PACKAGES.entries()) {
    const config = configs[i] as ApiExtractor.ExtractorConfig;
    const result = Extractor.invoke(config, {
      compilerState,
      localBuild: mode !== "check",
      messageCallback: (message) => {
        if (message.logLevel === ExtractorLogLevel.Error || message.logLevel === ExtractorLogLevel.Warning)
          say(`${name}: ${message.text}`);
        message.handled = true;
      },
    });
    const report = join(unshippedDir, `${name}.api.md`);
    const generated = join(cache, "report", `${name}.api.md`);
    if (result.apiReportChanged && mode === "check") {
      mismatched.push(name);
      const diff = spawnSync("diff", ["-u", report, generated], { encoding: "utf8" });
      say(`${name}: the public interface differs from docs/api/unshipped/${name}.api.md:`);
      say(diff.stdout || `(${report} is missing)`);
    } else if (!result.succeeded) {
      throw new Error(`API Extractor failed for ${name}:\n${lines.join("\n")}`);
    }
    const rollup = readFileSync(join(cache, "rollup", `${name}.d.ts`), "utf8");
    const committed = join(sdkDir, `${name}.d.ts`);
    if (mode === "check") {
      if (!existsSync(committed) || readFileSync(committed, "utf8") !== rollup) staleRollups.push(name);
    } else writeFileSync(committed, rollup);

    const shippedPath = join(shippedDir, `${name}.api.md`);
    if (mode === "release") {
      mkdirSync(shippedDir, { recursive: true });
      copyFileSync(report, shippedPath);
    }
    const shipped = existsSync(shippedPath) ? readFileSync(shippedPath, "utf8") : "";
    const current = readFileSync(existsSync(generated) ? generated : report, "utf8");
    sinceShipped[name] = compareReports(shipped, current);
  }

  for (const name of staleRollups)
    say(`docs/sdk/${name}.d.ts is out of date: run make api-update and commit it`);
  for (const [name, { added, changedOrRemoved }] of Object.entries(sinceShipped)) {
    if (added.length === 0 && changedOrRemoved.length === 0) {
      say(`${name}: no change since the shipped baseline`);
      continue;
    }
    say(`${name}: since the shipped baseline (docs/api/shipped/${name}.api.md):`);
    for (const head of added) say(`  added     ${head}`);
    for (const head of changedOrRemoved) say(`  CHANGED   ${head}   (may break plugins built against it)`);
  }
  if (mismatched.length > 0) {
    say(
      "The public interface changed without its baseline: if the change is intended, run `make api-update` " +
        "and commit docs/api/unshipped/ and docs/sdk/ (docs/releasing.md).",
    );
  }
  return { mismatched, staleRollups, sinceShipped, output: lines.join("\n") };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const mode = process.argv.includes("--release")
    ? "release"
    : process.argv.includes("--update")
      ? "update"
      : "check";
  const at = process.argv.indexOf("--root");
  const result = runApiCheck(mode, at > 0 ? (process.argv[at + 1] ?? repoRoot) : repoRoot);
  console.log(result.output);
  const failed = result.mismatched.length > 0 || result.staleRollups.length > 0;
  if (!failed) console.log(`api-check: ${PUBLIC_PACKAGES.join(", ")} match their baselines (${mode})`);
  process.exit(failed ? 1 : 0);
}
