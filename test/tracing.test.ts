/**
 * One trace per request across every hop. The services export their spans over OTLP/HTTP to a
 * collector run here (a small Fastify route decoding the JSON export); one `POST /api/users`, sent with a
 * caller's `traceparent`, must come back as one connected trace: the gateway's HTTP span, its NATS request,
 * rbac's handler and its PostgreSQL statements, the outbox relay's publish, the dispatcher's match, the
 * delivery job's run and its POST, and the receiver's request carrying the same trace id. Log lines
 * written inside the trace carry its ids.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";

import { flushTracing, stopTracing } from "@svc/observability";
import { gatewayService } from "@svc/service-gateway";
import { jobReaperService } from "@svc/service-job-reaper";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import Fastify from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { installExamplePlugin } from "../scripts/lib/example-plugin.js";
import { DEMO, repoRoot, seedDemo } from "../scripts/lib/stack.js";
import { pluginStackEnv } from "./plugins/runtime-fixtures.js";
import { createHarness } from "./support/harness.js";
import { bearerApi, signIn } from "./support/http.js";
import { Receiver } from "./support/receiver.js";

interface ExportedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly name: string;
  readonly kind: number;
  readonly scope: string;
  readonly attributes: Record<string, unknown>;
  /** Start and end, ms since the epoch (from the export's nanoseconds). */
  readonly start: number;
  readonly end: number;
}

/** An OTLP id as hex (the JSON export writes hex; base64 is accepted too). */
const hexId = (id: unknown) =>
  typeof id !== "string" || id === ""
    ? ""
    : /^[0-9a-f]+$/i.test(id)
      ? id.toLowerCase()
      : Buffer.from(id, "base64").toString("hex");

/** An OTLP/HTTP traces receiver: every span exported to it, flattened. */
async function startCollector() {
  const spans: ExportedSpan[] = [];
  const app = Fastify({ bodyLimit: 50 * 1024 * 1024 });
  app.post("/v1/traces", async (request) => {
    const body = request.body as {
      resourceSpans?: Array<{
        scopeSpans?: Array<{
          scope?: { name?: string };
          spans?: Array<{
            traceId: string;
            spanId: string;
            parentSpanId?: string;
            name: string;
            kind: number;
            startTimeUnixNano?: string | number;
            endTimeUnixNano?: string | number;
            attributes?: Array<{ key: string; value: Record<string, unknown> }>;
          }>;
        }>;
      }>;
    };
    for (const rs of body.resourceSpans ?? [])
      for (const ss of rs.scopeSpans ?? [])
        for (const s of ss.spans ?? [])
          spans.push({
            traceId: hexId(s.traceId),
            spanId: hexId(s.spanId),
            parentSpanId: hexId(s.parentSpanId),
            name: s.name,
            kind: s.kind,
            scope: ss.scope?.name ?? "",
            start: Number(BigInt(s.startTimeUnixNano ?? 0) / 1000n) / 1000,
            end: Number(BigInt(s.endTimeUnixNano ?? 0) / 1000n) / 1000,
            attributes: Object.fromEntries(
              (s.attributes ?? []).map((a) => [a.key, Object.values(a.value)[0]]),
            ),
          });
    return {};
  });
  const address = await app.listen({ host: "127.0.0.1", port: 0 });
  return { spans, url: `${address}/v1/traces`, close: () => app.close() };
}

/**
 * The trace as a waterfall (SVG): one bar per span, indented under its parent, for the operator guide
 * (docs/operator-guide.md, "Tracing"), written to test-results/tracing/.
 */
function waterfall(spans: readonly ExportedSpan[]): string {
  const byParent = new Map<string, ExportedSpan[]>();
  for (const s of spans) byParent.set(s.parentSpanId, [...(byParent.get(s.parentSpanId) ?? []), s]);
  const ids = new Set(spans.map((s) => s.spanId));
  const rows: Array<{ span: ExportedSpan; depth: number }> = [];
  const walk = (s: ExportedSpan, depth: number) => {
    rows.push({ span: s, depth });
    for (const c of (byParent.get(s.spanId) ?? []).sort((a, b) => a.start - b.start)) walk(c, depth + 1);
  };
  for (const root of spans.filter((s) => !ids.has(s.parentSpanId))) walk(root, 0);
  const t0 = Math.min(...spans.map((s) => s.start));
  const t1 = Math.max(...spans.map((s) => s.end));
  const width = 1100;
  const label = 460;
  const scale = (width - label - 90) / Math.max(1, t1 - t0);
  const esc = (t: string) => t.replace(/&/g, "&amp;").replace(/</g, "&lt;");
  const lines = rows.map(({ span, depth }, i) => {
    const y = 30 + i * 22;
    const x = label + (span.start - t0) * scale;
    const w = Math.max(2, (span.end - span.start) * scale);
    return `<text x="${6 + depth * 14}" y="${y + 13}">${esc(`${span.scope}: ${span.name}`)}</text><rect x="${x.toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="16" fill="#4a6fb5"/><text x="${(x + w + 4).toFixed(1)}" y="${y + 13}" fill="#555">${(span.end - span.start).toFixed(1)} ms</text>`;
  });
  const height = 40 + rows.length * 22;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="#fff"/><text x="6" y="18" font-weight="bold">trace ${spans[0]?.traceId ?? ""}: ${rows.length} spans, ${(t1 - t0).toFixed(1)} ms</text>${lines.join("")}</svg>\n`;
}

describe("tracing across the hops", () => {
  const receiver = new Receiver();
  const lines: string[] = [];
  const work = mkdtempSync(join(tmpdir(), "svc-tracing-"));
  let collector: Awaited<ReturnType<typeof startCollector>>;
  let h: Awaited<ReturnType<typeof createHarness>>;
  let base: string;

  /** The trace's exported spans, once `complete` says they are all there (10 s at most). */
  const spansOf = async (traceId: string, complete: (trace: ExportedSpan[]) => boolean) => {
    let trace: ExportedSpan[] = [];
    for (let i = 0; i < 50; i++) {
      await flushTracing();
      trace = collector.spans.filter((s) => s.traceId === traceId);
      if (complete(trace)) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    return trace;
  };

  const adminToken = async () =>
    (await signIn(base, { username: DEMO.adminUserName, password: DEMO.adminPassword })).json<{
      accessToken: string;
    }>().accessToken;

  /** Subscribes the receiver to `user.created`, then creates a user with the caller's `traceparent`. */
  const createUserInTrace = async (userName: string, traceparent: string) => {
    const api = bearerApi(() => base);
    const token = await adminToken();
    const sub = await api("POST", "/api/webhooks", token, {
      eventName: "user.created",
      targetUrl: receiver.url,
      secret: "a secret of the receiver's",
    });
    expect(sub.status, sub.text).toBe(201);
    const created = await api(
      "POST",
      "/api/users",
      token,
      { userName, password: `${userName}'s password` },
      { headers: { traceparent } },
    );
    expect(created.status, created.text).toBe(201);
    return { api, token, answered: String(created.headers.traceparent) };
  };

  beforeAll(async () => {
    collector = await startCollector();
    await receiver.start();
    h = await createHarness();
    await seedDemo(h.db.url, { withAdmin: true });
    const env = {
      ...pluginStackEnv(work, { dev: true }),
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: collector.url,
      // The collector here reads JSON; the default encoding is protobuf (the benchmark's).
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json",
      BackendHost__WebhookAllowedNetworks__0: "127.0.0.1/32",
      BackendHost__RateLimitApiPerMinute: "0",
      BackendHost__JobPollIntervalMs: "100",
    };
    // rbac's log lines are kept: those written inside the trace must carry its ids.
    const rbacLog = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
        done();
      },
    });
    await h.start(rbacService, { ...env, LOG_LEVEL: "debug" }, { logTo: rbacLog });
    await h.start(resolverService, env);
    await h.start(webhookDispatcherService, env);
    await h.start(jobReaperService, env);
    await h.start(pluginRegistryService, env);
    base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  }, 120_000);

  afterAll(async () => {
    await h?.stopAll();
    await stopTracing();
    await receiver.stop();
    await collector?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it("joins a user's creation to the delivery of its event in one trace, down to the receiver's request", async () => {
    // The caller's trace: the gateway continues it and answers its own span's traceparent in it.
    const traceId = randomBytes(16).toString("hex");
    const callerSpan = randomBytes(8).toString("hex");
    const { answered } = await createUserInTrace("traced-user", `00-${traceId}-${callerSpan}-01`);
    expect(answered).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    const gatewaySpan = answered.split("-")[2];

    // The receiver's request continues the same trace.
    await receiver.waitFor(1, 30_000);
    const delivered = receiver.received.find((r) => r.body.includes("traced-user"));
    expect(String(delivered?.headers.traceparent)).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));

    // Every span of the trace reaches the collector, and they form one tree under the caller's span.
    const wanted = ["claim webhook.deliver", "run webhook.deliver", "POST"];
    const trace = await spansOf(traceId, (trace) =>
      wanted.every((name) => trace.some((s) => s.name === name)),
    );
    const byId = new Map(trace.map((s) => [s.spanId, s]));
    const chain = (span: ExportedSpan | undefined): string[] => {
      const names: string[] = [];
      for (let s = span; s !== undefined; s = byId.get(s.parentSpanId)) names.unshift(`${s.scope}:${s.name}`);
      return names;
    };
    // One tree: each span's parent is in the trace, but the root, whose parent is the caller's span.
    for (const s of trace) {
      if (s.parentSpanId !== callerSpan) expect(byId.has(s.parentSpanId), `${s.name}'s parent`).toBe(true);
    }
    const root = trace.find((s) => s.parentSpanId === callerSpan);
    expect(root?.name).toBe("POST /api/users");
    expect(root?.spanId).toBe(gatewaySpan);
    // The HTTP request's attributes, on the span that was kept.
    expect(root?.attributes).toMatchObject({
      "http.request.method": "POST",
      "http.route": "/api/users",
      "url.path": "/api/users",
    });
    expect(Number(root?.attributes["http.response.status_code"])).toBe(201);
    // The path to the receiver's request, hop by hop.
    const post = trace.find((s) => s.name === "POST" && s.scope === "webhook-dispatcher");
    expect(chain(post)).toEqual([
      "gateway:POST /api/users",
      "gateway:send rbac.users.create",
      "rbac:process rbac.users.create",
      "outbox:publish user.created",
      "webhook-dispatcher:match user.created",
      "jobs:run webhook.deliver",
      "webhook-dispatcher:POST",
    ]);
    expect(delivered?.headers.traceparent).toContain(post?.spanId);
    // The receiver's host only: its path and query can hold its token.
    expect(post?.attributes["server.address"]).toBe("127.0.0.1");
    expect(post?.attributes["url.path"]).toBeUndefined();
    // rbac's statements are spans of its handler: the user's INSERT among them, with no value in it.
    const handler = trace.find((s) => s.name === "process rbac.users.create");
    const statements = trace.filter((s) => s.scope === "postgresql" && s.parentSpanId === handler?.spanId);
    const insert = statements.find((s) =>
      String(s.attributes["db.query.text"]).includes("INSERT INTO rbac.users"),
    );
    expect(insert?.attributes["db.system.name"]).toBe("postgresql");
    expect(JSON.stringify(trace)).not.toContain("traced-user's password");

    // The claim that took the delivery job is a span of the same trace, beside its run.
    const run = trace.find((s) => s.name === "run webhook.deliver");
    const claim = trace.find((s) => s.name === "claim webhook.deliver");
    expect(claim?.parentSpanId).toBe(run?.parentSpanId);
    const shots = join(repoRoot, "test-results", "tracing");
    mkdirSync(shots, { recursive: true });
    writeFileSync(join(shots, "user-created-trace.json"), JSON.stringify(trace, null, 2));
    writeFileSync(join(shots, "user-created-trace.svg"), waterfall(trace));
  }, 90_000);

  it("passes a trace that is not sampled on through every hop to the receiver, and records none of it", async () => {
    // The caller did not sample its trace; the sampler follows the parent, so nothing of it is recorded.
    const traceId = randomBytes(16).toString("hex");
    const callerSpan = randomBytes(8).toString("hex");
    const { api, token, answered } = await createUserInTrace(
      "untraced-user",
      `00-${traceId}-${callerSpan}-00`,
    );
    expect(answered).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-00$`));
    expect(answered).not.toContain(callerSpan);
    // Through rbac, the outbox, the events stream and the delivery job, the receiver's request carries it.
    let delivered: Array<{ body: string; headers: Record<string, unknown> }> = [];
    for (let i = 0; i < 150 && delivered.length === 0; i++) {
      delivered = receiver.received.filter((r) => r.body.includes("untraced-user"));
      if (delivered.length === 0) await new Promise((r) => setTimeout(r, 200));
    }
    expect(delivered.length).toBeGreaterThan(0);
    for (const d of delivered)
      expect(String(d.headers.traceparent)).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-00$`));

    // A sign-out in an unsampled trace: rbac's line carries its ids (the span id the gateway passed on).
    const outTrace = randomBytes(16).toString("hex");
    const out = await api("POST", "/api/auth/logout", token, undefined, {
      headers: { traceparent: `00-${outTrace}-${randomBytes(8).toString("hex")}-00` },
    });
    expect(out.status, out.text).toBeLessThan(300);
    const gatewaySpan = String(out.headers.traceparent).split("-")[2];
    const inTrace = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.trace_id === outTrace);
    expect(inTrace.map((l) => l.msg)).toContain("sessions revoked");
    for (const l of inTrace) expect(l.span_id, String(l.msg)).toBe(gatewaySpan);

    await flushTracing();
    expect(collector.spans.filter((s) => s.traceId === traceId || s.traceId === outTrace)).toEqual([]);
  }, 90_000);

  it("puts a public resolve's miss into its trace, though the route enters its context on demand", async () => {
    const traceId = randomBytes(16).toString("hex");
    // A host no one asked for yet: the gateway's cache misses and asks the resolver.
    const host = `trace-${randomBytes(4).toString("hex")}.example.test`;
    const resolved = await fetch(`${base}/workspace/public/resolve`, {
      headers: {
        "x-forwarded-host": host,
        traceparent: `00-${traceId}-${randomBytes(8).toString("hex")}-01`,
      },
    });
    expect(resolved.status).toBe(200);
    const gatewaySpan = String(resolved.headers.get("traceparent")).split("-")[2];
    const trace = await spansOf(traceId, (trace) =>
      trace.some((s) => s.name === "process resolver.workspace.resolve"),
    );
    const root = trace.find((s) => s.spanId === gatewaySpan);
    expect(root?.name).toBe("GET /workspace/public/resolve");
    const send = trace.find((s) => s.name === "send resolver.workspace.resolve");
    expect(send?.parentSpanId).toBe(gatewaySpan);
    expect(trace.find((s) => s.name === "process resolver.workspace.resolve")?.parentSpanId).toBe(
      send?.spanId,
    );

    // Asked again, the cache answers: the same route, its trace with the gateway's span alone.
    const again = randomBytes(16).toString("hex");
    const cached = await fetch(`${base}/workspace/public/resolve`, {
      headers: { "x-forwarded-host": host, traceparent: `00-${again}-${randomBytes(8).toString("hex")}-01` },
    });
    expect(String(cached.headers.get("traceparent"))).toMatch(new RegExp(`^00-${again}-[0-9a-f]{16}-01$`));
    await flushTracing();
    expect(collector.spans.filter((s) => s.traceId === again).map((s) => s.name)).toEqual([
      "GET /workspace/public/resolve",
    ]);
  }, 90_000);

  it("writes the trace's ids on the log lines written inside it", async () => {
    const token = await adminToken();
    const traceId = randomBytes(16).toString("hex");
    // Signing out revokes the session; rbac logs "sessions revoked" while handling it.
    const out = await bearerApi(() => base)("POST", "/api/auth/logout", token, undefined, {
      headers: { traceparent: `00-${traceId}-${randomBytes(8).toString("hex")}-01` },
    });
    expect(out.status, out.text).toBeLessThan(300);
    await flushTracing();
    const spans = new Set(collector.spans.filter((s) => s.traceId === traceId).map((s) => s.spanId));
    const inTrace = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.trace_id === traceId);
    expect(inTrace.map((l) => l.msg)).toContain("sessions revoked");
    // Each names a span of the trace: the handler's or one under it.
    for (const l of inTrace) expect(spans.has(String(l.span_id)), String(l.msg)).toBe(true);
    // Lines outside any trace carry no ids.
    expect(lines.some((l) => !l.includes('"trace_id"'))).toBe(true);
  }, 90_000);

  it("puts a plugin route's run in the plugin process into the caller's trace, and the event it publishes", async () => {
    await installExamplePlugin(base);
    const token = await adminToken();
    const traceId = randomBytes(16).toString("hex");
    const sent = await bearerApi(() => base)(
      "POST",
      "/api/plugins/hello/greetings",
      token,
      { to: "tracer", workspaceKey: DEMO.workspaceKey },
      { headers: { traceparent: `00-${traceId}-${randomBytes(8).toString("hex")}-01` } },
    );
    expect(sent.status, sent.text).toBe(202);
    const trace = await spansOf(traceId, (trace) => trace.some((s) => s.name === "match hello.greeted"));
    const byId = new Map(trace.map((s) => [s.spanId, s]));
    const run = trace.find((s) => s.name === "plugin hello sendGreeting");
    expect(run?.attributes["svc.plugin.outcome"]).toBe("ok");
    // The process's span is the child of the gateway's request to it, under the HTTP span.
    const request = byId.get(run?.parentSpanId ?? "");
    expect(request?.name).toBe("send plugins.hello.http");
    expect(byId.get(request?.parentSpanId ?? "")?.name).toBe("POST /api/plugins/:id/*");
    // The event the handler published continues the trace to the dispatcher.
    const match = trace.find((s) => s.name === "match hello.greeted");
    expect(match).toBeDefined();
    expect(byId.has(match?.parentSpanId ?? "")).toBe(true);
  }, 90_000);
});
