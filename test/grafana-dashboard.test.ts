/**
 * The Grafana dashboard (deploy/helm/svc/dashboards/svc-platform.json, shipped by the
 * chart as a ConfigMap for Grafana's sidecar) shows the gateway's request rates and latencies, job queue
 * depth and dead letters, webhook deliveries and circuits, and plugin lifecycle operations; every metric
 * its queries name, and every metric the chart's Prometheus rules name, is one the platform exposes. What
 * the platform exposes is read off the six running services' management ports, plus the process metrics
 * every production replica adds, the chart's recording rules and Prometheus's own `up`. With promtool,
 * every query is also checked as PromQL.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { JobStatus } from "@svc/jobs";
import { createMetricsRegistry } from "@svc/observability";
import type { RunningService } from "@svc/runtime";
import type { MetricObject } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";

import { repoRoot } from "../scripts/lib/stack.js";
import { startAllServices } from "./support/all-services.js";
import { createHarness } from "./support/harness.js";
import { http } from "./support/http.js";

const CHART = join(repoRoot, "deploy", "helm", "svc");
const promtool = spawnSync("promtool", ["--version"]).status === 0;

interface Target {
  expr: string;
}
interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { x: number; y: number; w: number; h: number };
  datasource?: { uid: string };
  targets?: Target[];
  panels?: Panel[];
}
interface Dashboard {
  uid: string;
  title: string;
  panels: Panel[];
  templating: { list: Array<{ name: string; type: string; query?: string | { query: string } }> };
}

const dashboard = JSON.parse(
  readFileSync(join(CHART, "dashboards", "svc-platform.json"), "utf8"),
) as Dashboard;
const allPanels = (panels: Panel[]): Panel[] => panels.flatMap((p) => [p, ...allPanels(p.panels ?? [])]);
const queryPanels = allPanels(dashboard.panels).filter((p) => p.type !== "row");

/** Every PromQL query of the dashboard (panels and template variables), by where it is. */
function dashboardQueries(): Array<{ where: string; expr: string }> {
  const out = queryPanels.flatMap((p) => (p.targets ?? []).map((t) => ({ where: p.title, expr: t.expr })));
  for (const v of dashboard.templating.list) {
    if (v.type !== "query" || v.query === undefined) continue;
    const text = typeof v.query === "string" ? v.query : v.query.query;
    // label_values(metric, label): the metric is a query of its own.
    const m = /^label_values\(\s*([^,]+),/.exec(text);
    out.push({ where: `variable ${v.name}`, expr: m?.[1] ?? text });
  }
  return out;
}

/** The expressions of the chart's Prometheus rules and the names they record. */
function ruleFiles(): { exprs: Array<{ where: string; expr: string }>; recorded: Map<string, string[]> } {
  const exprs: Array<{ where: string; expr: string }> = [];
  /** Each recorded name and the labels its expression keeps (its outermost `by`). */
  const recorded = new Map<string, string[]>();
  for (const file of readdirSync(join(CHART, "rules"))) {
    const doc = parseYaml(readFileSync(join(CHART, "rules", file), "utf8")) as {
      groups: Array<{ rules: Array<{ expr: string; record?: string; alert?: string }> }>;
    };
    for (const rule of doc.groups.flatMap((g) => g.rules)) {
      exprs.push({ where: `${file}: ${rule.alert ?? rule.record ?? "?"}`, expr: rule.expr });
      if (rule.record !== undefined) {
        const by = /\bby\s*\(([^)]*)\)/.exec(rule.expr)?.[1] ?? "";
        recorded.set(
          rule.record,
          by
            .split(",")
            .map((l) => l.trim())
            .filter((l) => l !== "" && l !== "le"),
        );
      }
    }
  }
  return { exprs, recorded };
}

const KEYWORDS = new Set(["and", "or", "unless", "bool", "offset", "inf", "nan", "atan2"]);

/** The metric names a PromQL expression selects (Grafana's variables allowed in ranges and matchers). */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, " ")
    .replace(/\[[^\]]*\]/g, " ")
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ");
  const names = new Set<string>();
  for (const m of bare.matchAll(/(?<![\w.$:])([A-Za-z_:][\w:]*)(?![\w:])(?!\s*\()/g)) {
    const name = m[1] ?? "";
    if (!KEYWORDS.has(name.toLowerCase())) names.add(name);
  }
  return [...names];
}

/** Sample names from the text exposition's `# TYPE` lines (histograms and summaries by their series). */
function exposedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name = "", kind] = m;
    names.add(name);
    if (kind === "histogram") for (const s of ["_bucket", "_sum", "_count"]) names.add(`${name}${s}`);
    if (kind === "summary") for (const s of ["_sum", "_count"]) names.add(`${name}${s}`);
  }
  return names;
}

/** Labels Prometheus adds to every scraped series (the chart's PodMonitor), and `service`, every registry's. */
const TARGET_LABELS = ["namespace", "pod", "container", "job", "instance", "endpoint", "service"];

/** The label names each exposed sample name may carry. */
function labelsOf(metric: MetricObject): Map<string, Set<string>> {
  const own = (metric as unknown as { labelNames?: string[] }).labelNames ?? [];
  const kind = String(metric.type);
  const names = new Map<string, Set<string>>([[metric.name, new Set([...own, ...TARGET_LABELS])]]);
  if (kind === "histogram") {
    names.set(`${metric.name}_bucket`, new Set([...own, ...TARGET_LABELS, "le"]));
    for (const s of ["_sum", "_count"]) names.set(`${metric.name}${s}`, new Set([...own, ...TARGET_LABELS]));
  }
  return names;
}

/** Every `metric{label op "value", …}` selector of an expression. */
function selectors(expr: string): Array<{ metric: string; label: string; op: string; value: string }> {
  const out: Array<{ metric: string; label: string; op: string; value: string }> = [];
  for (const m of expr.matchAll(/([A-Za-z_:][\w:]*)\s*\{([^}]*)\}/g)) {
    for (const matcher of (m[2] ?? "").matchAll(/([A-Za-z_]\w*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"/g)) {
      out.push({
        metric: m[1] ?? "",
        label: matcher[1] ?? "",
        op: matcher[2] ?? "",
        value: matcher[3] ?? "",
      });
    }
  }
  return out;
}

/** Labels whose every value the platform declares: a matcher naming another value selects nothing. */
const ENUMERATED: Record<string, { label: string; values: readonly string[] }> = {
  svc_webhook_deliveries_total: {
    label: "outcome",
    values: ["delivered", "failed", "deferred", "refused", "skipped", "error"],
  },
  svc_webhook_circuits: { label: "state", values: ["open", "half_open"] },
  svc_jobs_queue_depth: { label: "status", values: Object.values(JobStatus) },
};

const h = await createHarness();
const services: RunningService[] = [];
const exposed = new Set<string>();
const labels = new Map<string, Set<string>>();

beforeAll(async () => {
  for (const { service } of await startAllServices(h, { MANAGEMENT_PORT: "0", MANAGEMENT_HOST: "127.0.0.1" }))
    services.push(service);
  const withProcess = createMetricsRegistry("probe", true);
  for (const service of services) {
    const scraped = await http(`${service.hooks.managementAddress as string}/metrics`);
    expect(scraped.status).toBe(200);
    for (const name of exposedNames(scraped.text)) exposed.add(name);
  }
  // Production replicas add the process metrics (the tests' services leave them out).
  for (const name of exposedNames(await withProcess.metrics())) exposed.add(name);
  for (const registry of [...services.map((s) => s.deps.metrics), withProcess]) {
    for (const metric of registry.getMetricsAsArray()) {
      for (const [name, set] of labelsOf(metric))
        labels.set(name, new Set([...(labels.get(name) ?? []), ...set]));
    }
  }
  // Recording rules keep the labels they aggregate by; `up` has the target's.
  for (const [name, by] of ruleFiles().recorded) {
    exposed.add(name);
    labels.set(name, new Set([...by, ...TARGET_LABELS]));
  }
  exposed.add("up"); // Prometheus's own, per scraped target.
  labels.set("up", new Set(TARGET_LABELS));
}, 60_000);

afterAll(() => h.stopAll());

describe("the Grafana dashboard", () => {
  it("is a well-formed dashboard: unique ids, within the grid, one data source variable", () => {
    expect(dashboard.uid).toBe("svc-platform");
    const ids = allPanels(dashboard.panels).map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const p of queryPanels) {
      expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24);
      expect(p.datasource?.uid, p.title).toBe("${datasource}");
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
    }
    expect(dashboard.templating.list.map((v) => v.name)).toEqual(["datasource", "namespace"]);
  });

  it("shows requests and latency, queue depth and dead letters, deliveries and circuits, plugin lifecycle", () => {
    const names = new Set(dashboardQueries().flatMap((q) => metricNames(q.expr)));
    for (const metric of [
      "svc_http_request_duration_seconds_count",
      "svc_http_request_duration_seconds_bucket",
      "svc_jobs_queue_depth",
      "svc_webhook_deliveries_total",
      "svc_webhook_delivery_duration_seconds_bucket",
      "svc_webhook_circuits",
      "svc_plugin_lifecycle_operations_total",
      "svc_plugin_lifecycle_duration_ms_bucket",
    ]) {
      expect(names, metric).toContain(metric);
    }
    const deadLetters = dashboardQueries().find((q) => q.where === "Dead letters by type");
    expect(deadLetters?.expr).toContain('status="Failed"');
  });

  it("names only metrics the platform exposes, as do the chart's Prometheus rules", () => {
    expect(exposed.size).toBeGreaterThan(30);
    const unknown: string[] = [];
    for (const { where, expr } of [...dashboardQueries(), ...ruleFiles().exprs]) {
      const names = metricNames(expr);
      expect(names.length, `${where}: ${expr}`).toBeGreaterThan(0);
      for (const name of names) if (!exposed.has(name)) unknown.push(`${where}: ${name}`);
    }
    expect(unknown).toEqual([]);
  });

  it("selects only by labels those metrics carry, and only by values the platform declares", () => {
    const wrong: string[] = [];
    for (const { where, expr } of [...dashboardQueries(), ...ruleFiles().exprs]) {
      for (const s of selectors(expr)) {
        const known = labels.get(s.metric);
        if (known === undefined) wrong.push(`${where}: no labels known for ${s.metric}`);
        else if (!known.has(s.label)) wrong.push(`${where}: ${s.metric} has no label ${s.label}`);
        const enumerated = ENUMERATED[s.metric];
        if (enumerated?.label === s.label && !s.value.includes("$")) {
          const values = s.op.endsWith("~") ? s.value.split("|") : [s.value];
          for (const v of values)
            if (!enumerated.values.includes(v))
              wrong.push(`${where}: ${s.metric}{${s.label}} is never "${v}"`);
        }
      }
    }
    expect(wrong).toEqual([]);
    // The check itself sees a wrong label and a wrong value.
    expect(
      selectors('rate(svc_http_request_duration_seconds_count{status="500", route=~"/a|/b"}[5m])'),
    ).toEqual([
      { metric: "svc_http_request_duration_seconds_count", label: "status", op: "=", value: "500" },
      { metric: "svc_http_request_duration_seconds_count", label: "route", op: "=~", value: "/a|/b" },
    ]);
    expect(labels.get("svc_http_request_duration_seconds_count")?.has("status")).toBe(false);
    expect(labels.get("svc_http_request_duration_seconds_bucket")?.has("le")).toBe(true);
  });

  it("the name check itself catches an unknown metric and reads PromQL's syntax", () => {
    expect(metricNames('sum by (le, route) (rate(svc_x_bucket{a="b{c}"}[$__rate_interval]))')).toEqual([
      "svc_x_bucket",
    ]);
    expect(metricNames("max(svc:rec:ratio15m) > 0.5 and on () up == 0 or vector(0)")).toEqual([
      "svc:rec:ratio15m",
      "up",
    ]);
    expect(metricNames("histogram_quantile(0.95, sum(rate(a_b[5m] offset 1h)))")).toEqual(["a_b"]);
    expect(exposed.has("svc_no_such_metric_total")).toBe(false);
  });

  it.runIf(promtool || process.env.CI === "true")(
    "every query is valid PromQL (promtool check rules)",
    () => {
      const rules = dashboardQueries().map((q, i) => ({
        record: `dashboard:query_${i}`,
        expr: q.expr
          .replaceAll("$__rate_interval", "5m")
          .replaceAll("$__interval", "1m")
          .replaceAll("$namespace", ".*"),
      }));
      const dir = mkdtempSync(join(tmpdir(), "svc-dashboard-"));
      const file = join(dir, "queries.yaml");
      writeFileSync(file, JSON.stringify({ groups: [{ name: "dashboard", rules }] }));
      const check = spawnSync("promtool", ["check", "rules", file], { encoding: "utf8" });
      expect(check.status, `${check.stdout}${check.stderr}`).toBe(0);
      expect(check.stdout).toContain(`SUCCESS: ${rules.length} rules found`);
    },
  );

  it("ships in the chart as a ConfigMap for Grafana's sidecar when enabled", () => {
    const template = readFileSync(join(CHART, "templates", "grafana-dashboard.yaml"), "utf8");
    expect(template).toContain('.Files.Glob "dashboards/*.json"');
    expect(template).toContain("metrics.grafanaDashboard.enabled");
  });
});
