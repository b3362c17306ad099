/**
 * Every service's management listener (ADR 0010), on `MANAGEMENT_PORT` when it is set: the
 * Kubernetes way to probe and scrape each pod.
 * - `GET /health`: liveness; a process whose event loop answers is alive. Its body names the version.
 * - `GET /version`: the build (version, commit, build time, plugin contract).
 * - `GET /ready`: readiness (`checkReadiness`); 503 while NATS does not answer a round trip, PostgreSQL does
 *   not answer `SELECT 1`, the service is still starting or it is draining (from SIGTERM on). The body
 *   names what is down, as the gateway's `/ready` does.
 * - `GET /metrics`: this replica's own metrics (Prometheus text format), so every pod is its own series.
 * Nothing else is served (404), and nothing here needs a credential: bind it where only the kubelet and
 * Prometheus reach it (the chart's NetworkPolicy does).
 */
import { createServer, type Server, type ServerResponse } from "node:http";

import type { NatsConnection } from "@nats-io/transport-node";
import { natsIsReachable } from "@svc/bus";
import { type Db, dbIsReachable } from "@svc/db";
import { Gauge, type Logger, type Registry } from "@svc/observability";

import { BUILD_INFO, versionReport } from "./build-info.js";

export interface ManagementOptions {
  /** The service's name, reported by `/version`. */
  readonly service: string;
  readonly port: number;
  readonly host: string;
  /** The replica's readiness now (`checkReadiness` with its connections and phase). */
  readonly readiness: () => Promise<Readiness>;
  readonly metrics: Registry;
  readonly log: Logger;
}

/** What `/ready` answers. */
export interface Readiness {
  readonly status: 200 | 503;
  readonly body: Record<string, unknown>;
}

export type Phase = "starting" | "running" | "draining";

/**
 * Readiness, as every `/ready` answers it (this listener's and the gateway's): 503 while starting or
 * draining, else PostgreSQL (`SELECT 1`) and NATS (a round trip) checked in parallel within `timeoutMs`;
 * 503 names what is down.
 */
export async function checkReadiness(
  db: Db,
  nc: NatsConnection,
  phase: Phase,
  timeoutMs: number,
  /** Copies of what the service keeps in NATS: reported (`storage`), never a reason to be unready. */
  storage?: { report(): unknown },
): Promise<Readiness> {
  if (phase !== "running") return { status: 503, body: { status: phase, checks: {}, down: [] } };
  const [postgres, nats] = await Promise.all([dbIsReachable(db, timeoutMs), natsIsReachable(nc, timeoutMs)]);
  const checks = { postgres: postgres ? "up" : "down", nats: nats ? "up" : "down" };
  const copies = storage === undefined ? {} : { storage: storage.report() };
  if (postgres && nats) return { status: 200, body: { status: "ready", checks, ...copies } };
  const down = Object.entries(checks).flatMap(([k, v]) => (v === "down" ? [k] : []));
  return { status: 503, body: { status: "unavailable", checks, down, ...copies } };
}

/**
 * Every replica's own gauges: `svc_build_info{version,commit}` (1: which builds run) and
 * `svc_service_ready` (1 while `/ready` answers 200, checked at each scrape), so that an alert sees a
 * replica that is alive but not ready (its NATS or PostgreSQL connection lost), which `up` does not.
 */
export function registerServiceGauges(metrics: Registry, readiness: () => Promise<Readiness>): void {
  new Gauge({
    name: "svc_build_info",
    help: "The build this replica runs: always 1, labelled with the host version and the commit.",
    labelNames: ["version", "commit"] as const,
    registers: [metrics],
  })
    .labels(BUILD_INFO.version, BUILD_INFO.commit ?? "unknown")
    .set(1);
  new Gauge({
    name: "svc_service_ready",
    help: "1 while this replica is ready (started, not draining, NATS and PostgreSQL answering), else 0.",
    registers: [metrics],
    async collect() {
      this.set((await readiness()).status === 200 ? 1 : 0);
    },
  });
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
    if (path === "/health") return send(res, 200, { status: "ok", version: BUILD_INFO.version });
    if (path === "/version") return send(res, 200, versionReport(o.service));
    if (path === "/ready") {
      void o.readiness().then(({ status, body }) => send(res, status, body));
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
