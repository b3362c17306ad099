import type { NatsConnection } from "@nats-io/transport-node";
import type { Db } from "@svc/db";
import { BUILD_INFO, checkReadiness } from "@svc/runtime";
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";

export interface HealthOptions {
  readonly db: Db;
  readonly nc: NatsConnection;
  /** The copies of what the gateway keeps in NATS, reported in the body (`storage`). */
  readonly storage?: { report(): unknown };
  /** Each dependency check gives up after this long, ms. */
  readonly checkTimeoutMs?: number;
  /** True once the process was told to stop: /ready answers 503 while it still serves. */
  readonly isDraining?: () => boolean;
}

/**
 * `GET /health`: liveness, checks nothing (a live process answers); its body names the version (the build's
 * commit and time are on the management port's `/version` only, not on the public port). `GET /ready`:
 * readiness as every service's management listener answers it (`checkReadiness`): PostgreSQL and NATS checked in parallel;
 * 503 names what is down, and 503 with status `draining` once the process was told to stop.
 */
export const healthPlugin = fp<HealthOptions>(
  async (app: FastifyInstance, { db, nc, storage, checkTimeoutMs = 2_000, isDraining = () => false }) => {
    app.get("/health", async (_request, reply) =>
      reply.header("cache-control", "no-store").send({ status: "ok", version: BUILD_INFO.version }),
    );
    app.get("/ready", async (_request, reply) => {
      const { status, body } = await checkReadiness(
        db,
        nc,
        isDraining() ? "draining" : "running",
        checkTimeoutMs,
        storage,
      );
      return reply.code(status).header("cache-control", "no-store").send(body);
    });
  },
  { name: "svc-health", fastify: "5.x" },
);
