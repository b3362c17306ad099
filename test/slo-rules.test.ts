/**
 * The plugin lifecycle objectives as Prometheus recording and alerting rules, shipped by
 * the Helm chart as a PrometheusRule. `promtool check rules` validates them and `promtool test rules` runs
 * their unit tests (test/prometheus/): each alert fires on the series that break its objective, only once
 * about 200 operations were seen, and stays silent otherwise.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";

import { describe, expect, it } from "vitest";

import { repoRoot } from "../scripts/lib/stack.js";

const RULES = join(repoRoot, "deploy", "helm", "svc", "rules", "plugin-lifecycle.rules.yaml");
const TESTS = join(repoRoot, "test", "prometheus", "plugin-lifecycle.test.yaml");
/** promtool (Debian: apt-get install prometheus); CI installs it, so there its absence is a failure. */
const promtool = spawnSync("promtool", ["--version"]).status === 0;

describe("plugin lifecycle objectives", () => {
  it.runIf(promtool || process.env.CI === "true")("pass promtool check rules", () => {
    const run = spawnSync("promtool", ["check", "rules", RULES], { encoding: "utf8" });
    expect(run.status, `${run.stdout}${run.stderr}`).toBe(0);
    expect(run.stdout).toContain("SUCCESS: 8 rules found");
  });

  it.runIf(promtool || process.env.CI === "true")("fire exactly as their promtool unit tests say", () => {
    const run = spawnSync("promtool", ["test", "rules", TESTS], { encoding: "utf8", cwd: repoRoot });
    expect(run.status, `${run.stdout}${run.stderr}`).toBe(0);
    expect(run.stdout).toContain("SUCCESS");
  });

  it("are what the chart's PrometheusRule carries", () => {
    const template = readFileSync(
      join(repoRoot, "deploy", "helm", "svc", "templates", "prometheusrule.yaml"),
      "utf8",
    );
    expect(template).toContain("kind: PrometheusRule");
    expect(template).toContain('"rules/plugin-lifecycle.rules.yaml"');
    const rules = readFileSync(RULES, "utf8");
    for (const name of [
      "SvcPluginActivationSlow",
      "SvcPluginLifecycleErrorRateHigh",
      "SvcPluginLifecycleSuccessRateLow",
    ]) {
      expect(rules).toContain(`alert: ${name}`);
    }
  });
});

describe("the platform's alerts", () => {
  const PLATFORM = join(repoRoot, "deploy", "helm", "svc", "rules", "platform.rules.yaml");

  it.runIf(promtool || process.env.CI === "true")("pass promtool check rules", () => {
    const run = spawnSync("promtool", ["check", "rules", PLATFORM], { encoding: "utf8" });
    expect(run.status, `${run.stdout}${run.stderr}`).toBe(0);
    expect(run.stdout).toContain("SUCCESS: 5 rules found");
  });

  it.runIf(promtool || process.env.CI === "true")(
    "fire exactly as their promtool unit tests say: circuits by max, the failure rate without deferrals, alive but not ready, dead letters by type",
    () => {
      const tests = join(repoRoot, "test", "prometheus", "platform.test.yaml");
      const run = spawnSync("promtool", ["test", "rules", tests], { encoding: "utf8", cwd: repoRoot });
      expect(run.status, `${run.stdout}${run.stderr}`).toBe(0);
      expect(run.stdout).toContain("SUCCESS");
    },
  );
});
