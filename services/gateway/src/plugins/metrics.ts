import type { Bus } from "@svc/bus";
import { messageClient, metricsMessages } from "@svc/contracts";
import { Histogram, type Registry } from "@svc/observability";
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import { AggregatorRegistry } from "prom-client";

export interface MetricsOptions {
  readonly registry: Registry;
  readonly bus: Bus;
}

/**
 * Prometheus text at `GET /metrics` and a request-duration histogram labelled by route pattern (not the raw
 * URL, so cardinality stays bounded) and status code.
 *
 * The other services have no HTTP port, so /metrics also gathers their metrics over NATS
 * (`metrics.collect`, answered by every replica) and merges them with the gateway's own. Series with the
 * same labels from several replicas of one service are summed, as prom-client's cluster aggregation does;
 * every series carries its `service` label.
 */
/**
 * The public port's metrics name no commit: `svc_build_info` keeps its `version` there;
 * the commit is on every management port's `/metrics` and `/version`, which are not public.
 */
function withoutCommit(metrics: object[]): object[] {
  return metrics.map((m) => {
    const metric = m as { name?: string; values?: Array<{ labels?: Record<string, unknown> }> };
    if (metric.name !== "svc_build_info" || metric.values === undefined) return m;
    return {
      ...metric,
      values: metric.values.map((v) => ({
        ...v,
        labels: Object.fromEntries(Object.entries(v.labels ?? {}).filter(([name]) => name !== "commit")),
      })),
    };
  });
}

export const metricsPlugin = fp<MetricsOptions>(
  async (app: FastifyInstance, { registry, bus }) => {
    const duration = new Histogram({
      name: "svc_http_request_duration_seconds",
      help: "HTTP request duration at the gateway, by method, route pattern and status code.",
      labelNames: ["method", "route", "status_code"] as const,
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    });
    app.addHook("onResponse", (request, reply, done) => {
      duration.observe(
        {
          method: request.method,
          route: request.routeOptions.url ?? "unmatched",
          status_code: reply.statusCode,
        },
        reply.elapsedTime / 1_000,
      );
      done();
    });
    app.get("/metrics", { config: { public: true } }, async (_request, reply) => {
      const replies = await messageClient(bus, metricsMessages).requestAll(
        "collect",
        {},
        // A replica whose reply comes more than `stallMs` after the one before is missed by this scrape:
        // 300 ms leaves room for a busy replica's collection (a queue-depth query) on a loaded node.
        { maxWaitMs: 2_000, stallMs: 300 },
      );
      // Gateways are scraped one by one (each its own target) and do not answer metrics.collect: their
      // request histogram (route × method × status) would outgrow NATS's payload limit.
      const others = replies.filter((r) => r.service !== "gateway");
      const merged = AggregatorRegistry.aggregate(
        [await registry.getMetricsAsJSON(), ...others.map((r) => r.metrics as object[])].map(withoutCommit),
      );
      return reply.type(registry.contentType).send(await merged.metrics());
    });
  },
  { name: "svc-metrics", fastify: "5.x" },
);
