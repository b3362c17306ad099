/**
 * Every service's management listener (issue 15, ADR 0010), on `MANAGEMENT_PORT` when it is set: the
 * Kubernetes way to probe and scrape each pod.
 * - `GET /health`: liveness; a process whose event loop answers is alive.
 * - `GET /ready`: readiness; 503 while the NATS connection is down, PostgreSQL does not answer
 *   `SELECT 1`, the service is still starting or it is draining (from SIGTERM on). The body names what is down, as the
 *   gateway's `/ready` does.
 * - `GET /metrics`: this replica's own metrics (Prometheus text format), so every pod is its own series.
 * Nothing else is served (404), and nothing here needs a credential: bind it where only the kubelet and
 * Prometheus reach it (the chart's NetworkPolicy does).
 */
import { createServer, type Server, type ServerResponse } from "node:http";

import type { NatsConnection } from "@nats-io/transport-node";
import { isNatsConnected } from "@svc/bus";
import { type Db, dbIsReachable } from "@svc/db";
import type { Logger, Registry } from "@svc/observability";

export interface ManagementOptions {
  readonly port: number;
  readonly host: string;
  readonly db: Db;
  readonly nc: NatsConnection;
  readonly metrics: Registry;
  /** `starting` until every handler is in place, `draining` from SIGTERM on: both answer 503. */
  readonly phase: () => "starting" | "running" | "draining";
  readonly log: Logger;
}

export interface ManagementServer {
  /** `http://host:port` */
  readonly address: string;
  close(): Promise<void>;
}

export async function startManagementServer(o: ManagementOptions): Promise<ManagementServer> {
  const send = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" });
    res.end(JSON.stringify(body));
  };
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" && req.method !== "HEAD")
      return send(res, 405, { status: "method not allowed" });
    if (path === "/health") return send(res, 200, { status: "ok" });
    if (path === "/ready") {
      const phase = o.phase();
      if (phase !== "running") return send(res, 503, { status: phase, checks: {}, down: [] });
      const nats = isNatsConnected(o.nc);
      void dbIsReachable(o.db, 1_000).then((postgres) => {
        const checks = { postgres: postgres ? "up" : "down", nats: nats ? "up" : "down" };
        const ready = postgres && nats;
        send(res, ready ? 200 : 503, {
          status: ready ? "ready" : "unavailable",
          checks,
          ...(ready
            ? {}
            : {
                down: Object.entries(checks)
                  .filter(([, v]) => v === "down")
                  .map(([k]) => k),
              }),
        });
      });
      return;
    }
    if (path === "/metrics") {
      void o.metrics.metrics().then(
        (text) => {
          res.writeHead(200, { "content-type": o.metrics.contentType, "cache-control": "no-store" });
          res.end(text);
        },
        (error: unknown) => {
          o.log.warn({ error: (error as Error).message }, "could not collect metrics");
          send(res, 500, { status: "metrics unavailable" });
        },
      );
      return;
    }
    send(res, 404, { status: "not found" });
  });
  server.keepAliveTimeout = 5_000;
  server.headersTimeout = 10_000;
  server.requestTimeout = 10_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(o.port, o.host, () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  o.log.info({ port }, "management listener up");
  return {
    address: `http://${o.host === "0.0.0.0" ? "127.0.0.1" : o.host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
