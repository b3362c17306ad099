import type { NatsConnection } from "@nats-io/transport-node";
import { natsIsReachable } from "@svc/bus";
import { type Db, dbIsReachable } from "@svc/db";
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";

export interface HealthOptions {
  readonly db: Db;
  readonly nc: NatsConnection;
  /** Each dependency check gives up after this long, ms. */
  readonly checkTimeoutMs?: number;
  /** True once the process was told to stop: /ready answers 503 while it still serves. */
  readonly isDraining?: () => boolean;
}

type CheckState = "up" | "down";

/**
 * `GET /health`: liveness, checks nothing (a live process answers). `GET /ready`: readiness, checks
 * PostgreSQL (`SELECT 1`) and NATS (a round trip) in parallel; 503 names what is down, and 503 with
 * status `draining` once the process was told to stop.
 */
export const healthPlugin = fp<HealthOptions>(
  async (app: FastifyInstance, { db, nc, checkTimeoutMs = 2_000, isDraining = () => false }) => {
    app.get("/health", async (_request, reply) =>
      reply.header("cache-control", "no-store").send({ status: "ok" }),
    );
    app.get("/ready", async (_request, reply) => {
      if (isDraining()) {
        return reply
          .code(503)
          .header("cache-control", "no-store")
          .send({ status: "draining", checks: {}, down: [] });
      }
      const [postgres, nats] = await Promise.all([
        dbIsReachable(db, checkTimeoutMs),
        natsIsReachable(nc, checkTimeoutMs),
      ]);
      const checks: Record<string, CheckState> = {
        postgres: postgres ? "up" : "down",
        nats: nats ? "up" : "down",
      };
      const ready = postgres && nats;
      return reply
        .code(ready ? 200 : 503)
        .header("cache-control", "no-store")
        .send({
          status: ready ? "ready" : "unavailable",
          checks,
          ...(ready ? {} : { down: Object.keys(checks).filter((k) => checks[k] === "down") }),
        });
    });
  },
  { name: "svc-health", fastify: "5.x" },
);
