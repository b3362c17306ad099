import { Histogram, type Registry } from "@svc/observability";
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";

export interface MetricsOptions {
  readonly registry: Registry;
}

/**
 * Prometheus text at `GET /metrics` and a request-duration histogram labelled by route pattern (not the raw
 * URL, so cardinality stays bounded) and status code.
 */
export const metricsPlugin = fp<MetricsOptions>(
  async (app: FastifyInstance, { registry }) => {
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
      const body = await registry.metrics();
      return reply.type(registry.contentType).send(body);
    });
  },
  { name: "svc-metrics", fastify: "5.x" },
);
