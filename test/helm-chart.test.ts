/**
 * The Helm chart, checked with Helm 4 (unpacked from the pinned dev dependency,
 * scripts/helm.ts): `helm lint` and `helm template` with the default values and with a production-like
 * values file; every container of the rendered YAML has probes, resources and a restrictive
 * securityContext; every PrometheusRule expression passes `promtool check rules`; a wrong value fails at
 * template time through values.schema.json.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";

import { helmBinary } from "../scripts/helm.js";
import { repoRoot } from "../scripts/lib/stack.js";

const CHART = join(repoRoot, "deploy", "helm", "svc");
const PRODUCTION = join(CHART, "ci", "production-values.yaml");
const promtool = spawnSync("promtool", ["--version"]).status === 0;
let helm: string;

interface Manifest {
  kind: string;
  metadata: { name: string };
  spec?: Record<string, unknown>;
}

const run = (args: string[]) => spawnSync(helm, args, { encoding: "utf8", cwd: repoRoot });

function render(extra: string[] = []): Manifest[] {
  const result = run(["template", "rel", CHART, "--namespace", "platform", ...extra]);
  expect(result.status, result.stderr).toBe(0);
  return parseAllDocuments(result.stdout)
    .map((d) => d.toJS() as Manifest | null)
    .filter((m): m is Manifest => m !== null);
}

interface Container {
  name: string;
  livenessProbe?: unknown;
  readinessProbe?: { httpGet?: { path: string; port: string } };
  resources?: { requests?: Record<string, unknown>; limits?: Record<string, unknown> };
  securityContext?: {
    allowPrivilegeEscalation?: boolean;
    readOnlyRootFilesystem?: boolean;
    capabilities?: { drop?: string[] };
  };
}
const podSpec = (m: Manifest) =>
  (
    m.spec as {
      template: { spec: { containers: Container[]; securityContext?: { runAsNonRoot?: boolean } } };
    }
  ).template.spec;

beforeAll(async () => {
  helm = await helmBinary();
}, 120_000);

describe("the Helm chart", () => {
  it("trusts the ingress's ranges for X-Forwarded-For when the Ingress is enabled, unless set", () => {
    type Env = { name: string; value?: string };
    const gatewayEnv = (extra: string[]) => {
      const gateway = render(extra).find(
        (m) => m.kind === "Deployment" && m.metadata.name.endsWith("gateway"),
      );
      const containers = (gateway?.spec as { template: { spec: { containers: Array<{ env?: Env[] }> } } })
        .template.spec.containers;
      return (containers[0]?.env ?? []).filter((e) => e.name.startsWith("BackendHost__TrustedProxies"));
    };
    expect(gatewayEnv([])).toEqual([]);
    const trusted = gatewayEnv(["--set", "ingress.enabled=true"]);
    expect(trusted[0]).toEqual({ name: "BackendHost__TrustedProxies__0", value: "10.0.0.0/8" });
    expect(trusted).toHaveLength(4);
    const own = gatewayEnv([
      "--set",
      "ingress.enabled=true",
      "--set",
      "env.BackendHost__TrustedProxies__0=10.42.0.0/16",
    ]);
    expect(own).toEqual([{ name: "BackendHost__TrustedProxies__0", value: "10.42.0.0/16" }]);
  });

  it("gives secrets as mounted files, each key only to the service that uses it", () => {
    type Env = { name: string; value?: string; valueFrom?: unknown };
    type Pod = {
      containers: Array<{ name: string; env?: Env[]; volumeMounts?: Array<{ name: string }> }>;
      volumes?: Array<{ name: string; secret?: { items?: Array<{ key: string }>; defaultMode?: number } }>;
    };
    const pods = render(["-f", PRODUCTION])
      .filter((m) => m.kind === "Deployment" || m.kind === "Job")
      .map((m) => (m.spec as { template: { spec: Pod } }).template.spec);
    expect(pods.length).toBeGreaterThan(6);
    const keysOf = (pod: Pod) =>
      (pod.volumes ?? []).flatMap((v) => (v.secret?.items ?? []).map((i) => i.key)).sort();
    for (const pod of pods) {
      const container = pod.containers[0];
      const env = container?.env ?? [];
      // No secret in the environment (where every process of the user could read it).
      expect(
        env.filter((e) => e.valueFrom !== undefined),
        container?.name,
      ).toEqual([]);
      expect(env.map((e) => e.name)).toContain("DATABASE_URL_FILE");
      // NATS over TLS for every pod; each service's own NATS credentials, none for the
      // migration job (it does not use NATS).
      const tls = ["ca.crt", "tls.crt", "tls.key"];
      const name = container?.name ?? "";
      const own = name === "migrate" ? [] : [`${name}.creds`];
      // The plugin processes' signing key and client certificate: the registry's pod only.
      const plugins =
        name === "plugin-registry" ? ["plugin-signing.nk", "plugin-tls.crt", "plugin-tls.key"] : [];
      const expected =
        name === "rbac"
          ? ["DATABASE_URL", "JWT_SIGNING_KEY"]
          : name === "webhook-dispatcher"
            ? ["DATABASE_URL", "SECRETS_ENCRYPTION_KEY"]
            : ["DATABASE_URL"];
      expect(keysOf(pod), name).toEqual([...expected, ...own, ...plugins, ...tls].sort());
      expect(
        env.some((e) => e.name.startsWith("NATS_PLUGIN_SIGNING")),
        name,
      ).toBe(name === "plugin-registry");
      if (name !== "migrate") {
        expect(env.find((e) => e.name === "NATS_CREDS_FILE")?.value, name).toBe(
          `/var/run/secrets/svc/nats-auth/${name}.creds`,
        );
      }
      expect(env.find((e) => e.name === "NATS_TLS_CERT_FILE")?.value, name).toBe(
        "/var/run/secrets/svc/nats-tls/tls.crt",
      );
      for (const v of pod.volumes ?? []) if (v.secret) expect(v.secret.defaultMode, v.name).toBe(0o440);
    }
  });

  it("passes helm lint with the default and the production-like values", () => {
    for (const values of [[], ["-f", PRODUCTION]]) {
      const lint = run(["lint", CHART, "--strict", ...values]);
      expect(lint.status, `${lint.stdout}${lint.stderr}`).toBe(0);
    }
  });

  it.each([
    ["default values", []],
    ["production-like values", ["-f", PRODUCTION]],
  ])("renders with %s: every container probed, resourced and locked down", (_name, values) => {
    const manifests = render(values);
    const deployments = manifests.filter((m) => m.kind === "Deployment");
    expect(deployments.map((d) => d.metadata.name).sort()).toEqual(
      ["gateway", "job-reaper", "plugin-registry", "rbac", "resolver", "webhook-dispatcher"].map(
        (s) => `rel-svc-${s}`,
      ),
    );
    for (const d of deployments) {
      const spec = podSpec(d);
      expect(spec.securityContext?.runAsNonRoot, d.metadata.name).toBe(true);
      for (const c of spec.containers) {
        const where = `${d.metadata.name}/${c.name}`;
        expect(c.livenessProbe, where).toBeDefined();
        expect(c.readinessProbe?.httpGet, where).toEqual({ path: "/ready", port: "management" });
        expect(c.resources?.requests?.cpu, where).toBeDefined();
        expect(c.resources?.requests?.memory, where).toBeDefined();
        expect(c.resources?.limits?.memory, where).toBeDefined();
        expect(c.securityContext, where).toMatchObject({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ["ALL"] },
        });
      }
    }
    // Stateless services scale; a service with more than one replica keeps one through disruptions.
    const hpas = manifests.filter((m) => m.kind === "HorizontalPodAutoscaler").map((m) => m.metadata.name);
    expect(hpas).toEqual(expect.arrayContaining(["rel-svc-gateway", "rel-svc-resolver", "rel-svc-rbac"]));
    const pdbs = manifests.filter((m) => m.kind === "PodDisruptionBudget").map((m) => m.metadata.name);
    expect(pdbs).toEqual(expect.arrayContaining(hpas));
  });

  it("renders the production extras: PodMonitor, PrometheusRule, Ingress, NetworkPolicies", () => {
    const kinds = render(["-f", PRODUCTION]).map((m) => m.kind);
    for (const kind of ["PodMonitor", "PrometheusRule", "Ingress", "NetworkPolicy"])
      expect(kinds).toContain(kind);
    // The default follows the convention too: no aggregate ServiceMonitor.
    expect(render().map((m) => m.kind)).not.toContain("ServiceMonitor");
    // The Grafana dashboard, for the sidecar: labelled, in its folder, the JSON intact.
    const dashboards = render(["-f", PRODUCTION]).find(
      (m) => m.kind === "ConfigMap" && m.metadata.name === "rel-svc-dashboards",
    ) as
      (Manifest & { data: Record<string, string>; metadata: { labels: Record<string, string> } }) | undefined;
    expect(dashboards?.metadata.labels.grafana_dashboard).toBe("1");
    const json = JSON.parse(dashboards?.data["svc-platform.json"] ?? "null") as { uid: string } | null;
    expect(json?.uid).toBe("svc-platform");
    expect(render().some((m) => m.metadata.name === "rel-svc-dashboards")).toBe(false);
  });

  it.skipIf(!promtool && process.env.CI !== "true")(
    "every PrometheusRule expression passes promtool check rules",
    () => {
      const rule = render(["-f", PRODUCTION]).find((m) => m.kind === "PrometheusRule");
      const groups = (rule?.spec as { groups: Array<{ rules: unknown[] }> }).groups;
      expect(groups.flatMap((g) => g.rules).length).toBeGreaterThan(6);
      const dir = mkdtempSync(join(tmpdir(), "svc-rules-"));
      const file = join(dir, "rules.yaml");
      writeFileSync(file, JSON.stringify({ groups }));
      const check = spawnSync("promtool", ["check", "rules", file], { encoding: "utf8" });
      expect(check.status, `${check.stdout}${check.stderr}`).toBe(0);
      expect(check.stdout).toContain("SUCCESS");
    },
  );

  it("spreads every service's replicas and keeps three copies in NATS in production", () => {
    const deployments = render(["-f", PRODUCTION]).filter((m) => m.kind === "Deployment");
    expect(deployments).toHaveLength(6);
    for (const d of deployments) {
      const name = d.metadata.name.replace(/^rel-svc-/, "");
      const spec = podSpec(d) as unknown as {
        affinity?: { podAntiAffinity?: { preferredDuringSchedulingIgnoredDuringExecution?: unknown[] } };
        topologySpreadConstraints?: Array<{
          topologyKey: string;
          labelSelector: { matchLabels: Record<string, string> };
        }>;
        containers: Array<{ env: Array<{ name: string; value?: string }> }>;
      };
      expect(spec.affinity?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution).toEqual([
        {
          weight: 100,
          podAffinityTerm: {
            topologyKey: "kubernetes.io/hostname",
            labelSelector: {
              matchLabels: { "app.kubernetes.io/instance": "rel", "app.kubernetes.io/name": name },
            },
          },
        },
      ]);
      expect(spec.topologySpreadConstraints?.map((c) => c.topologyKey)).toEqual([
        "topology.kubernetes.io/zone",
        "kubernetes.io/hostname",
      ]);
      for (const c of spec.topologySpreadConstraints ?? [])
        expect(c.labelSelector.matchLabels["app.kubernetes.io/name"]).toBe(name);
      const env = spec.containers[0]?.env ?? [];
      expect(env.filter((e) => e.name === "BackendHost__NatsReplicas")).toEqual([
        { name: "BackendHost__NatsReplicas", value: "3" },
      ]);
    }
    // Every service runs two replicas or more in production, each with a budget allowing one disruption.
    const budgets = render(["-f", PRODUCTION]).filter((m) => m.kind === "PodDisruptionBudget");
    expect(budgets).toHaveLength(6);
    for (const b of budgets) expect(b.spec?.maxUnavailable).toBe(1);
    // A required anti-affinity on request; none at all on request.
    const hard = podSpec(
      render(["--set", "scheduling.antiAffinity=hard"]).find((m) => m.kind === "Deployment") as Manifest,
    ) as unknown as { affinity: { podAntiAffinity: Record<string, unknown> } };
    expect(Object.keys(hard.affinity.podAntiAffinity)).toEqual([
      "requiredDuringSchedulingIgnoredDuringExecution",
    ]);
    const none = podSpec(
      render(["--set", "scheduling.antiAffinity=none"]).find((m) => m.kind === "Deployment") as Manifest,
    ) as unknown as { affinity?: unknown };
    expect(none.affinity).toBeUndefined();
  });

  it("refuses more NATS copies than servers, and its notes warn of one copy, or one replica, on a cluster", () => {
    const over = run(["template", "rel", CHART, "--set", "nats.replicas=3"]);
    expect(over.status).not.toBe(0);
    expect(over.stderr).toContain("nats.replicas (3) is more than nats.clusterSize (1)");
    const notes = (args: string[]) => {
      const r = run(["install", "rel", CHART, "--dry-run=client", ...args]);
      expect(r.status, r.stderr).toBe(0);
      return r.stdout.slice(r.stdout.indexOf("NOTES:"));
    };
    const oneCopy = notes(["--set", "nats.clusterSize=3"]);
    expect(oneCopy).toContain("NATS is a cluster of 3 servers but nats.replicas is 1");
    expect(oneCopy).toMatch(/job-reaper, plugin-registry run a single replica/);
    const production = notes(["-f", PRODUCTION]);
    expect(production).not.toContain("nats.replicas is 1");
    expect(production).not.toContain("single replica");
    // A single server: nothing to warn of.
    expect(notes([])).not.toContain("nats.replicas is 1");
  });

  it("refuses a wrong value through the schema (replicas: two)", () => {
    const result = run(["template", "rel", CHART, "--set", "services.gateway.replicas=two"]);
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/services\/gateway\/replicas/);
    const unknown = run(["template", "rel", CHART, "--set", "gatway.port=80"]);
    expect(unknown.status).not.toBe(0);
  });

  it("sets the OTEL_* variables of every service when tracing is on, and none when off", () => {
    type Env = { name: string; value?: string; valueFrom?: unknown };
    const envOf = (extra: string[]) =>
      render(extra)
        .filter((m) => m.kind === "Deployment")
        .map((m) => ({
          name: m.metadata.name,
          env:
            (m.spec as { template: { spec: { containers: Array<{ env?: Env[] }> } } }).template.spec
              .containers[0]?.env ?? [],
        }));
    for (const d of envOf([]))
      expect(
        d.env.filter((e) => e.name.startsWith("OTEL_")),
        d.name,
      ).toEqual([]);
    const on = envOf([
      "--set",
      "tracing.enabled=true",
      "--set",
      "tracing.endpoint=http://otel-collector.monitoring:4318",
      "--set",
      "tracing.headersSecret.name=otel-headers",
    ]);
    expect(on.length).toBeGreaterThan(5);
    for (const d of on) {
      const byName = new Map(d.env.map((e) => [e.name, e]));
      expect(byName.get("OTEL_EXPORTER_OTLP_ENDPOINT")?.value, d.name).toBe(
        "http://otel-collector.monitoring:4318",
      );
      expect(byName.get("OTEL_TRACES_SAMPLER")?.value).toBe("parentbased_traceidratio");
      expect(byName.get("OTEL_TRACES_SAMPLER_ARG")?.value).toBe("0.1");
      expect(byName.get("OTEL_RESOURCE_ATTRIBUTES")?.value).toContain("k8s.pod.name=$(K8S_POD_NAME)");
      expect(byName.get("OTEL_EXPORTER_OTLP_HEADERS")?.valueFrom).toEqual({
        secretKeyRef: { name: "otel-headers", key: "OTEL_EXPORTER_OTLP_HEADERS" },
      });
      // The pod's name is defined before the attribute that refers to it.
      const names = d.env.map((e) => e.name);
      expect(names.indexOf("K8S_POD_NAME")).toBeLessThan(names.indexOf("OTEL_RESOURCE_ATTRIBUTES"));
    }
    const missing = run(["template", "rel", CHART, "--set", "tracing.enabled=true"]);
    expect(missing.status).not.toBe(0);
    expect(missing.stderr).toContain("tracing.endpoint is required");
    const badRatio = run(["template", "rel", CHART, "--set-string", "tracing.samplerArg=2"]);
    expect(badRatio.status).not.toBe(0);
  });
});
